import { describe, expect, it } from 'vitest';
import { MAX_IMPORT_BYTES, checkImport, formatLines, formatScore, layerLabel, readImportFile, splitLines, statusSummary } from './memory';

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
});
