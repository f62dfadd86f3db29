import { describe, expect, it } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { diffStats, keepBoth, lineDiff, listConflicts, resolveConflict, sideBySide, splitTextLines } from './conflicts';

describe('line diff', () => {
  it('splits lines without a phantom last line', () => {
    expect(splitTextLines('')).toEqual([]);
    expect(splitTextLines('a\nb\n')).toEqual(['a', 'b']);
    expect(splitTextLines('a\n\nb')).toEqual(['a', '', 'b']);
  });

  it('finds the common lines and marks the rest', () => {
    const ops = lineDiff(['a', 'b', 'c', 'd'], ['a', 'x', 'c', 'd', 'e']);
    expect(ops).toEqual([
      { op: 'same', text: 'a' },
      { op: 'del', text: 'b' },
      { op: 'add', text: 'x' },
      { op: 'same', text: 'c' },
      { op: 'same', text: 'd' },
      { op: 'add', text: 'e' },
    ]);
    expect(lineDiff([], [])).toEqual([]);
    expect(lineDiff(['a'], [])).toEqual([{ op: 'del', text: 'a' }]);
  });

  it('aligns a moved middle by the longest common subsequence', () => {
    const ops = lineDiff(['1', '2', '3', '4', '5'], ['1', '3', '4', '2', '5']);
    expect(ops.filter((o) => o.op === 'same').map((o) => o.text)).toEqual(['1', '3', '4', '5']);
    expect(ops.filter((o) => o.op !== 'same')).toEqual([
      { op: 'del', text: '2' },
      { op: 'add', text: '2' },
    ]);
  });

  it('pairs changed lines side by side with numbers per side, Chinese included', () => {
    const rows = sideBySide('# 计划\n第一步\n共同\n', '# 计划\n第一步（改）\n新增一行\n共同\n');
    expect(rows.map((r) => [r.left?.text ?? null, r.right?.text ?? null, !!r.left?.changed, !!r.right?.changed])).toEqual([
      ['# 计划', '# 计划', false, false],
      ['第一步', '第一步（改）', true, true],
      [null, '新增一行', false, true],
      ['共同', '共同', false, false],
    ]);
    expect(rows[3].left?.n).toBe(3);
    expect(rows[3].right?.n).toBe(4);
    expect(diffStats(rows)).toEqual({ left: 1, right: 2 });
  });

  it('keeps both sides: every current line plus the other side’s missing lines in place', () => {
    expect(keepBoth('a\nb\nc\n', 'a\nB\nc\nd\n')).toBe('a\nb\nB\nc\nd\n');
    expect(keepBoth('same\n', 'same\n')).toBe('same\n');
    expect(keepBoth('', 'only other')).toBe('only other\n');
  });
});

describe('conflict calls', () => {
  function client() {
    FakeWebSocket.reset();
    const gw = new GatewayClient({ url: 'ws://t/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    return { gw, ws };
  }
  const flush = () => new Promise((r) => setTimeout(r, 0));

  it('lists open conflicts and resolves with the protocol’s params', async () => {
    const { gw, ws } = client();
    await flush();
    const list = listConflicts(gw);
    await flush();
    const req = ws.lastRequest('conflicts.list');
    expect(req.params).toEqual({ state: 'open', limit: 100 });
    ws.reply(req, { conflicts: [{ id: 3, path: 'memory/global/a.md', other: 'x', ts: 1, state: 'open' }] });
    expect((await list).map((c) => c.id)).toEqual([3]);

    const other = resolveConflict(gw, 3, 'other');
    await flush();
    expect(ws.lastRequest('conflicts.resolve').params).toEqual({ id: 3, choice: 'other', idempotencyKey: expect.any(String) });
    ws.reply(ws.lastRequest('conflicts.resolve'), { conflict: { id: 3, state: 'resolved' } });
    expect((await other).state).toBe('resolved');

    const merged = resolveConflict(gw, 4, 'merged', 'both\n');
    await flush();
    expect(ws.lastRequest('conflicts.resolve').params).toEqual({ id: 4, choice: 'merged', content: 'both\n', idempotencyKey: expect.any(String) });
    ws.reply(ws.lastRequest('conflicts.resolve'), { conflict: { id: 4, state: 'resolved' } });
    await merged;
    await expect(resolveConflict(gw, 5, 'merged', '')).rejects.toThrow(/merged text/);
    gw.stop();
  });
});
