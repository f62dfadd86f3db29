import { describe, expect, it } from 'vitest';
import {
  MAX_IMPORT_BYTES,
  accessLine,
  accessRule,
  checkImport,
  formatLines,
  formatScore,
  groupByLayer,
  layerBadge,
  layerCode,
  layerLabel,
  readImportFile,
  splitLines,
  statusSummary,
  type MemoryFile,
} from './memory';

const enc = new TextEncoder();

describe('memory helpers', () => {
  it('formats scores with two decimals and line ranges', () => {
    expect(formatScore(0.87654)).toBe('0.88');
    expect(formatScore(1)).toBe('1.00');
    expect(formatLines(3, 9)).toBe('3-9');
    expect(formatLines(4, 4)).toBe('4');
  });

  it('labels layers', () => {
    expect(layerLabel('global')).toBe('global');
    expect(layerLabel('role', 'main')).toBe('role: main');
  });

  it('summarises the status', () => {
    expect(statusSummary(null)).toBe('memory: unknown');
    expect(
      statusSummary({ state: 'indexing', files: 3, chunks: 40, provider: 'local', model: 'm', progress: { done: 1, total: 3 } }),
    ).toBe('memory: indexing 1/3 · 3 files · 40 chunks · local/m');
  });

  it('accepts UTF-8 Markdown and text, Chinese included', () => {
    expect(checkImport('笔记.md', enc.encode('# 标题\n内容'))).toEqual({ ok: true, content: '# 标题\n内容' });
    expect(checkImport('a.TXT', enc.encode('x'))).toEqual({ ok: true, content: 'x' });
  });

  it('rejects other types, non-UTF-8 and oversized files with a clear message', () => {
    const pdf = checkImport('a.pdf', enc.encode('x'));
    expect(pdf.ok).toBe(false);
    const gbk = checkImport('gbk.md', new Uint8Array([0xc4, 0xe3, 0xba, 0xc3, 0xff]));
    expect(gbk).toMatchObject({ ok: false });
    expect(!gbk.ok && gbk.error).toContain('not UTF-8');
    const big = checkImport('big.md', new Uint8Array(MAX_IMPORT_BYTES + 1));
    expect(!big.ok && big.error).toContain('4 MiB');
  });

  it('reads a File and checks its size before reading', async () => {
    const ok = await readImportFile(new File(['hello 世界'], 'n.md', { type: 'text/markdown' }));
    expect(ok).toEqual({ ok: true, content: 'hello 世界' });
    const big = new File([new Uint8Array(MAX_IMPORT_BYTES + 10)], 'big.txt');
    const r = await readImportFile(big);
    expect(r.ok).toBe(false);
  });

  it('splits a text around a line range', () => {
    const t = 'l1\nl2\nl3\nl4';
    expect(splitLines(t, 2, 3)).toEqual(['l1\n', 'l2\nl3', '\nl4']);
    expect(splitLines(t, 1, 1)).toEqual(['', 'l1', '\nl2\nl3\nl4']);
    expect(splitLines(t, 0, 0)).toEqual([t, '', '']);
    expect(splitLines(t, 4, 99)).toEqual(['l1\nl2\nl3\n', 'l4', '']);
  });

  it('names layers L1 global, L2 role, L3 session', () => {
    expect(layerCode('global')).toBe('L1');
    expect(layerCode('role')).toBe('L2');
    expect(layerCode('session')).toBe('L3');
    expect(layerCode('archive')).toBe('other');
    expect(layerBadge('session')).toBe('L3 session');
    expect(layerBadge(undefined)).toBe('memory');
  });

  it('describes who may read and write a file', () => {
    expect(accessLine({ rule: 'global/**', read: ['*'], write: ['admin', 'main'], collaborate: [] })).toBe('read: * · write: admin, main');
    expect(
      accessLine({ rule: 'sessions/*/**', read: ['$session_owner', 'admin'], write: ['$session_owner'], collaborate: ['$session_owner'], sessionOwner: 'writer' }),
    ).toBe('read: $session_owner (writer), admin · write: $session_owner (writer) · collaborate: $session_owner (writer)');
    expect(accessLine({ rule: '', read: [], write: [], collaborate: [] })).toBe('read: nobody · write: nobody');
    expect(accessLine(undefined)).toBe('');
    expect(accessRule({ rule: 'roles/*/**', source: 'defaults', read: [], write: [], collaborate: [] })).toBe('rule "roles/*/**" (defaults)');
    expect(accessRule({ rule: 'global/a.md', line: 3, source: 'file', read: [], write: [], collaborate: [] })).toBe('rule "global/a.md" (.acl line 3)');
    expect(accessRule({ rule: '', read: [], write: [], collaborate: [] })).toContain('no rule');
  });

  it('groups files by layer in L1, L2, L3 order and filters one layer', () => {
    const f = (path: string, layer?: string): MemoryFile => ({ path, size: 1, mtime: 1, chunks: 1, layer });
    const files = [f('s/a', 'session'), f('r/a', 'role'), f('g/a', 'global'), f('r/b', 'role'), f('x', undefined)];
    expect(groupByLayer(files).map((g) => [g.code, g.files.map((x) => x.path)])).toEqual([
      ['L1', ['g/a']],
      ['L2', ['r/a', 'r/b']],
      ['L3', ['s/a']],
      ['other', ['x']],
    ]);
    expect(groupByLayer(files, 'L2').map((g) => g.code)).toEqual(['L2']);
    expect(groupByLayer([], 'all')).toEqual([]);
  });
});
