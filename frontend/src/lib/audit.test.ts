import { describe, expect, it } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { auditParams, formatAuditTime, tailAudit } from './audit';

describe('audit helpers', () => {
  it('builds audit.tail params, leaving empty filters out', () => {
    expect(auditParams({})).toEqual({ n: 200 });
    expect(auditParams({ role: ' writer ', result: 'denied', operation: 'get', n: 50 })).toEqual({ n: 50, role: 'writer', result: 'denied', operation: 'get' });
    expect(auditParams({ role: '  ', result: '', operation: '' })).toEqual({ n: 200 });
  });

  it('formats stamps and keeps unparsable ones', () => {
    const s = formatAuditTime('2026-03-04T05:06:07Z');
    expect(s).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    expect(formatAuditTime('not a time')).toBe('not a time');
  });

  it('returns entries newest first', async () => {
    FakeWebSocket.reset();
    const gw = new GatewayClient({ url: 'ws://t/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    await new Promise((r) => setTimeout(r, 0));
    const p = tailAudit(gw, { result: 'denied' });
    await new Promise((r) => setTimeout(r, 0));
    const req = ws.lastRequest('audit.tail');
    expect(req.params).toEqual({ n: 200, result: 'denied' });
    ws.reply(req, {
      entries: [
        { timestamp: '2026-01-01T00:00:01Z', operation: 'get', role: 'a', target: 'x', result: 'denied', reason: 'r' },
        { timestamp: '2026-01-01T00:00:03Z', operation: 'get', role: 'b', target: 'y', result: 'denied', reason: 'r' },
      ],
      corrupt: 2,
    });
    const page = await p;
    expect(page.entries.map((e) => e.role)).toEqual(['b', 'a']);
    expect(page.corrupt).toBe(2);
  });
});
