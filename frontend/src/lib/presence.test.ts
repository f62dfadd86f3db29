// presence.update from the phone page: lastInputSeconds on input (throttled) and visibility changes.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { InputReporter, reportPhonePresence } from './presence';

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(1_700_000_000_000);
  FakeWebSocket.reset();
});
afterEach(() => vi.useRealTimers());

describe('InputReporter', () => {
  it('reports the first input at once and the last of a throttle window at its end', () => {
    const sent: number[] = [];
    const r = new InputReporter({ send: (s) => sent.push(s), throttleMs: 15_000 });
    r.report();
    expect(sent).toEqual([]); // no input yet: unknown, nothing said
    r.input();
    expect(sent).toEqual([0]);
    vi.advanceTimersByTime(1_000);
    r.input();
    vi.advanceTimersByTime(1_000);
    r.input(); // at 2 s: the last input of the window
    expect(sent).toEqual([0]);
    vi.advanceTimersByTime(13_000); // the window ends at 15 s
    expect(sent).toEqual([0, 13]);
    vi.advanceTimersByTime(60_000);
    expect(sent).toEqual([0, 13]); // no input, no report
    r.input();
    expect(sent).toEqual([0, 13, 0]);
  });

  it('hiding the page reports at once; showing it counts as input', () => {
    const sent: number[] = [];
    const r = new InputReporter({ send: (s) => sent.push(s), throttleMs: 15_000 });
    r.visibility(false);
    expect(sent).toEqual([]);
    r.visibility(true);
    expect(sent).toEqual([0]);
    vi.advanceTimersByTime(4_000);
    r.visibility(false); // inside the window, but a hide is said at once
    expect(sent).toEqual([0, 4]);
    vi.advanceTimersByTime(30_000);
    expect(sent).toEqual([0, 4]);
  });
});

describe('reportPhonePresence', () => {
  it('sends presence.update on each open connection, and the current value to one that connects', () => {
    const listeners = new Set<(role: string, gw: GatewayClient | null) => void>();
    const onConn = (f: (role: string, gw: GatewayClient | null) => void) => {
      listeners.add(f);
      return () => listeners.delete(f);
    };
    const open = (role: string) => {
      const gw = new GatewayClient({ url: 'ws://x/ws', WebSocket: FakeWebSocket, role: role === 'node' ? 'node' : 'operator' });
      for (const f of listeners) f(role, gw);
      gw.start();
      const ws = FakeWebSocket.last();
      ws.handshake();
      return { gw, ws };
    };
    const win = new EventTarget();
    const doc = Object.assign(new EventTarget(), { visibilityState: 'visible' as DocumentVisibilityState });
    const stop = reportPhonePresence(onConn, win, doc, { throttleMs: 15_000 });
    const updates = (ws: FakeWebSocket) => ws.sent.filter((f) => f.method === 'presence.update').map((f) => f.params.lastInputSeconds);

    const node = open('node');
    expect(updates(node.ws)).toEqual([]); // connected before any input: nothing to say
    win.dispatchEvent(new Event('pointerdown'));
    expect(updates(node.ws)).toEqual([0]);

    vi.advanceTimersByTime(20_000);
    const op = open('operator'); // a connection that opens later learns the value at once
    expect(updates(op.ws)).toEqual([20]);

    vi.advanceTimersByTime(5_000);
    doc.visibilityState = 'hidden';
    doc.dispatchEvent(new Event('visibilitychange'));
    expect(updates(node.ws)).toEqual([0, 25]);
    expect(updates(op.ws)).toEqual([20, 25]);

    for (const f of listeners) f('operator', null); // closed: no more reports on it
    win.dispatchEvent(new Event('keydown'));
    vi.advanceTimersByTime(15_000);
    expect(updates(op.ws)).toEqual([20, 25]);
    expect(updates(node.ws)).toEqual([0, 25, 15]);

    stop();
    win.dispatchEvent(new Event('touchstart'));
    vi.advanceTimersByTime(60_000);
    expect(updates(node.ws)).toEqual([0, 25, 15]);
    node.gw.stop();
    op.gw.stop();
  });
});
