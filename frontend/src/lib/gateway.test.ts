import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { get } from 'svelte/store';
import { DEFAULT_BACKOFF, GatewayClient, GatewayError, backoffDelay, type GatewayOptions } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';

let ids = 0;
function makeClient(extra: Partial<GatewayOptions> = {}) {
  return new GatewayClient({
    url: 'ws://127.0.0.1:18789/ws',
    token: 'secret',
    instanceId: 'inst-1',
    platform: 'test',
    WebSocket: FakeWebSocket,
    random: () => 0.5, // no jitter
    uuid: () => `id-${++ids}`,
    ...extra,
  });
}

beforeEach(() => {
  vi.useFakeTimers();
  FakeWebSocket.reset();
  ids = 0;
});
afterEach(() => {
  vi.useRealTimers();
});

describe('handshake', () => {
  it('waits for connect.challenge, then sends connect with role operator, client info and token', () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    expect(ws.url).toBe('ws://127.0.0.1:18789/ws');
    expect(get(gw.status).state).toBe('connecting');

    ws.serverOpen();
    expect(ws.sent).toHaveLength(0); // nothing before the challenge

    ws.challenge();
    const req = ws.connectFrame();
    expect(req.type).toBe('req');
    expect(typeof req.id).toBe('string');
    expect(req.params).toMatchObject({
      minProtocol: 1,
      maxProtocol: 1,
      role: 'operator',
      scopes: [],
      caps: [],
      commands: [],
      permissions: {},
      auth: { token: 'secret' },
      client: { id: 'atrium-ui', mode: 'ui', instanceId: 'inst-1', platform: 'test' },
    });
    expect(typeof req.params.client.version).toBe('string');
    expect(get(gw.status).state).toBe('connecting');

    ws.helloOk();
    const st = get(gw.status);
    expect(st.state).toBe('connected');
    expect(st.error).toBeNull();
    expect(st.hello?.server?.connId).toBe('c1');
  });

  it('rejects requests before the handshake with UNAVAILABLE', async () => {
    const gw = makeClient();
    gw.start();
    FakeWebSocket.last().serverOpen();
    await expect(gw.request('health')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('UNAUTHORIZED → state unauthorized, no reconnect; a new token reconnects', () => {
    const gw = makeClient({ token: 'wrong' });
    gw.start();
    const ws = FakeWebSocket.last();
    ws.serverOpen();
    ws.challenge();
    ws.fail(ws.connectFrame(), 'UNAUTHORIZED', 'bad token');
    ws.serverClose(4001, 'unauthorized');
    expect(get(gw.status)).toMatchObject({ state: 'unauthorized', error: 'bad token' });
    vi.advanceTimersByTime(120_000);
    expect(FakeWebSocket.instances).toHaveLength(1);

    gw.setToken('right');
    gw.reconnectNow();
    expect(FakeWebSocket.instances).toHaveLength(2);
    const ws2 = FakeWebSocket.last();
    ws2.serverOpen();
    ws2.challenge();
    expect(ws2.connectFrame().params.auth).toEqual({ token: 'right' });
    ws2.helloOk();
    expect(get(gw.status).state).toBe('connected');
  });

  it('close code 4001 alone also means unauthorized', () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.serverOpen();
    ws.challenge();
    ws.serverClose(4001, 'token refused');
    expect(get(gw.status).state).toBe('unauthorized');
    vi.advanceTimersByTime(60_000);
    expect(FakeWebSocket.instances).toHaveLength(1);
  });

  it('sends no auth token when none is configured', () => {
    const gw = makeClient({ token: null });
    gw.start();
    const ws = FakeWebSocket.last();
    ws.serverOpen();
    ws.challenge();
    expect(ws.connectFrame().params.auth).toEqual({});
  });

  it('gives up on a handshake that never completes and retries', () => {
    const gw = makeClient({ handshakeTimeoutMs: 1_000 });
    gw.start();
    FakeWebSocket.last().serverOpen();
    vi.advanceTimersByTime(1_000);
    expect(get(gw.status).state).toBe('disconnected');
    expect(FakeWebSocket.instances[0].closedWith).not.toBeNull();
    vi.advanceTimersByTime(DEFAULT_BACKOFF.initialMs);
    expect(FakeWebSocket.instances).toHaveLength(2);
  });
});

describe('requests', () => {
  it('matches responses to requests by id, in any order', async () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    const a = gw.request('memory.status');
    const b = gw.request('memory.files', { x: 1 });
    const ra = ws.lastRequest('memory.status');
    const rb = ws.lastRequest('memory.files');
    expect(ra.id).not.toBe(rb.id);
    expect(rb.params).toEqual({ x: 1 });
    ws.reply(rb, { files: ['b'] });
    ws.reply(ra, { state: 'ready' });
    await expect(a).resolves.toEqual({ state: 'ready' });
    await expect(b).resolves.toEqual({ files: ['b'] });
  });

  it('maps error responses to GatewayError with code and message', async () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    const p = gw.request('memory.get', { path: 'nope.md' });
    ws.fail(ws.lastRequest('memory.get'), 'NOT_FOUND', 'no such file', false);
    const err = await p.catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe('NOT_FOUND');
    expect(err.message).toBe('no such file');
    expect(err.retryable).toBe(false);
  });

  it('maps a malformed error to INTERNAL', async () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    const p = gw.request('health');
    ws.serverSend({ type: 'res', id: ws.lastRequest('health').id, ok: false });
    await expect(p).rejects.toMatchObject({ code: 'INTERNAL' });
  });

  it('times out with TIMEOUT', async () => {
    const gw = makeClient();
    gw.start();
    FakeWebSocket.last().handshake();
    const p = gw.request('health', {}, { timeoutMs: 500 });
    vi.advanceTimersByTime(500);
    await expect(p).rejects.toMatchObject({ code: 'TIMEOUT' });
  });

  it('adds an idempotencyKey to every method with side effects only, keeping a caller key', () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    void gw.request('chat.send', { profileId: 'main', message: 'hi' }).catch(() => {});
    void gw.request('memory.import', { name: 'a.md', content: 'x' }).catch(() => {});
    void gw.request('memory.import', { name: 'b.md', content: 'y', idempotencyKey: 'mine' }).catch(() => {});
    void gw.request('memory.search', { query: 'q' }).catch(() => {});
    void gw.request('message.delete', { messageId: 'm-1' }).catch(() => {});
    void gw.request('chat.cancel', { profileId: 'main', sessionId: 's' }).catch(() => {});
    const sends = ws.sent.filter((f) => f.method !== 'connect');
    expect(typeof sends[0].params.idempotencyKey).toBe('string');
    expect(sends[0].params.idempotencyKey).not.toBe('');
    expect(typeof sends[1].params.idempotencyKey).toBe('string');
    expect(sends[1].params.idempotencyKey).not.toBe(sends[0].params.idempotencyKey);
    expect(sends[2].params.idempotencyKey).toBe('mine');
    expect(sends[3].params.idempotencyKey).toBeUndefined();
    expect(typeof sends[4].params.idempotencyKey).toBe('string');
    expect(typeof sends[5].params.idempotencyKey).toBe('string');
  });

  it("follows the gateway's own list of methods with side effects (hello-ok features.sideEffects)", () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.serverOpen();
    ws.challenge();
    const req = ws.connectFrame();
    ws.serverSend({
      type: 'res',
      id: req.id,
      ok: true,
      payload: { type: 'hello-ok', protocol: 1, features: { methods: [], events: [], sideEffects: ['custom.do'] }, policy: {} },
    });
    void gw.request('custom.do', {}).catch(() => {});
    void gw.request('chat.send', { profileId: 'main', message: 'hi' }).catch(() => {});
    const sends = ws.sent.filter((f) => f.method !== 'connect');
    expect(typeof sends[0].params.idempotencyKey).toBe('string');
    expect(sends[1].params.idempotencyKey).toBeUndefined();
    expect(gw.hasSideEffects('custom.do')).toBe(true);
    expect(gw.hasSideEffects('chat.send')).toBe(false);
  });

  it('refuses a request larger than policy.maxPayload without sending it', async () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake({ maxPayload: 200 });
    const before = ws.sent.length;
    await expect(gw.request('memory.import', { name: 'a.md', content: 'x'.repeat(500) })).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
    });
    expect(ws.sent.length).toBe(before);
  });

  it('rejects every pending request with UNAVAILABLE when the socket closes', async () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    const a = gw.request('memory.search', { query: 'a' });
    const b = gw.request('history.profile', { profileId: 'main' });
    ws.serverClose(1006, 'gone');
    await expect(a).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(b).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(get(gw.status).state).toBe('disconnected');
    expect(get(gw.status).error).toContain('gone');
    // A late response on the dead socket does nothing.
    ws.serverSend({ type: 'res', id: 'whatever', ok: true, payload: {} });
  });
});

describe('events', () => {
  it('fans out events to every subscriber, "*" included, until unsubscribed', () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    const a = vi.fn();
    const b = vi.fn();
    const all = vi.fn();
    const offA = gw.on('memory.changed', a);
    gw.on('memory.changed', b);
    gw.on('*', all);
    gw.on('chat.chunk', () => {
      throw new Error('a broken handler must not stop the others');
    });
    const errSpy = vi.spyOn(console, 'error').mockImplementation(() => {});

    ws.serverEvent('memory.changed', { paths: ['a.md'], reason: 'import' }, 7);
    expect(a).toHaveBeenCalledWith({ paths: ['a.md'], reason: 'import' }, 'memory.changed', 7);
    expect(b).toHaveBeenCalledTimes(1);
    expect(all).toHaveBeenCalledTimes(1);

    ws.serverEvent('chat.chunk', { runId: 'r', delta: 'x', seq: 1 }, 8);
    expect(all).toHaveBeenCalledTimes(2);
    expect(errSpy).toHaveBeenCalled();

    offA();
    ws.serverEvent('memory.changed', { paths: [] }, 9);
    expect(a).toHaveBeenCalledTimes(1);
    expect(b).toHaveBeenCalledTimes(2);
    errSpy.mockRestore();
  });

  it('does not deliver connect.challenge to subscribers, and ignores non-JSON frames', () => {
    const gw = makeClient();
    const all = vi.fn();
    gw.on('*', all);
    gw.start();
    const ws = FakeWebSocket.last();
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    ws.serverOpen();
    ws.challenge();
    ws.serverSend('not json {');
    ws.helloOk();
    expect(all).not.toHaveBeenCalled();
    expect(get(gw.status).state).toBe('connected');
    warn.mockRestore();
  });
});

describe('reconnect', () => {
  it('backoffDelay: capped exponential schedule, jitter within ±25%', () => {
    const mid = () => 0.5;
    const schedule = [0, 1, 2, 3, 4, 5, 6, 10].map((n) => backoffDelay(n, DEFAULT_BACKOFF, mid));
    expect(schedule).toEqual([500, 1000, 2000, 4000, 8000, 15000, 15000, 15000]);
    expect(backoffDelay(2, DEFAULT_BACKOFF, () => 0)).toBe(1500);
    expect(backoffDelay(2, DEFAULT_BACKOFF, () => 0.999999)).toBe(2500);
    expect(backoffDelay(20, DEFAULT_BACKOFF, () => 0.999999)).toBeLessThanOrEqual(DEFAULT_BACKOFF.maxMs);
    expect(backoffDelay(20, DEFAULT_BACKOFF, () => 0)).toBe(11250);
  });

  it('reconnects on the backoff schedule and resets it after a successful handshake', () => {
    const gw = makeClient();
    gw.start();
    FakeWebSocket.last().handshake();
    const seen: number[] = [];
    gw.status.subscribe((s) => {
      if (s.state === 'disconnected' && s.retryInMs !== null) seen.push(s.retryInMs);
    });

    // Four failed attempts in a row: 500, 1000, 2000, 4000 ms.
    FakeWebSocket.last().serverClose(1006);
    for (const delay of [500, 1000, 2000]) {
      const n = FakeWebSocket.instances.length;
      vi.advanceTimersByTime(delay - 1);
      expect(FakeWebSocket.instances.length).toBe(n);
      vi.advanceTimersByTime(1);
      expect(FakeWebSocket.instances.length).toBe(n + 1);
      expect(get(gw.status).state).toBe('connecting');
      FakeWebSocket.last().serverClose(1006);
    }
    expect(seen).toEqual([500, 1000, 2000, 4000]);

    vi.advanceTimersByTime(4000);
    FakeWebSocket.last().handshake();
    expect(get(gw.status)).toMatchObject({ state: 'connected', attempt: 0 });

    // After success the schedule starts over.
    FakeWebSocket.last().serverClose(1001, 'server restart');
    expect(seen[seen.length - 1]).toBe(500);
  });

  it('applies jitter from the random source', () => {
    const gw = makeClient({ random: () => 0 });
    gw.start();
    FakeWebSocket.last().serverClose(1006);
    expect(get(gw.status).retryInMs).toBe(375);
  });

  it('a heartbeat gap (no frames for 2 ticks) drops the connection and reconnects', () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake({ tickIntervalMs: 1000 });
    vi.advanceTimersByTime(6_000);
    ws.serverEvent('tick', { ts: 1 }, 2); // keeps it alive
    vi.advanceTimersByTime(6_000);
    expect(get(gw.status).state).toBe('connected');
    vi.advanceTimersByTime(1_000);
    expect(get(gw.status).state).toBe('disconnected');
    expect(ws.closedWith).not.toBeNull();
  });

  it('stop() closes and stays down', async () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.handshake();
    const p = gw.request('health');
    gw.stop();
    await expect(p).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(get(gw.status).state).toBe('disconnected');
    vi.advanceTimersByTime(60_000);
    expect(FakeWebSocket.instances).toHaveLength(1);
  });

  it('a constructor failure (bad URL) is retried like a closed socket', () => {
    let fail = true;
    class Flaky extends FakeWebSocket {
      constructor(url: string) {
        if (fail) throw new SyntaxError('bad url');
        super(url);
      }
    }
    const gw = makeClient({ WebSocket: Flaky });
    gw.start();
    expect(get(gw.status).state).toBe('disconnected');
    expect(get(gw.status).error).toContain('bad url');
    fail = false;
    vi.advanceTimersByTime(500);
    expect(FakeWebSocket.instances).toHaveLength(1);
  });
});

describe('device connections (issue 16)', () => {
  it('prepareConnect completes the params with the challenge nonce; the connect carries role, roles, caps, commands', async () => {
    vi.useRealTimers();
    const seen: string[] = [];
    const gw = makeClient({
      token: null,
      role: 'node',
      roles: ['operator', 'node'],
      mode: 'node',
      clientId: 'atrium-phone',
      displayName: 'Pixel',
      caps: ['location'],
      commands: ['location.get'],
      prepareConnect: async (p, ch) => {
        seen.push(ch.nonce);
        return { ...p, auth: { setupCode: 'ABCD2345' }, device: { nonce: ch.nonce } };
      },
    });
    gw.start();
    const ws = FakeWebSocket.last();
    ws.serverOpen();
    ws.serverEvent('connect.challenge', { nonce: 'nn', ts: 1 });
    await vi.waitFor(() => expect(ws.connectFrame()).toBeDefined());
    expect(seen).toEqual(['nn']);
    expect(ws.connectFrame().params).toMatchObject({
      role: 'node',
      roles: ['operator', 'node'],
      caps: ['location'],
      commands: ['location.get'],
      client: { id: 'atrium-phone', mode: 'node', displayName: 'Pixel' },
      auth: { setupCode: 'ABCD2345' },
      device: { nonce: 'nn' },
    });
    gw.stop();
  });

  it('a refusal keeps its code and details, and NOT_PAIRED / FORBIDDEN stop the retries like UNAUTHORIZED', () => {
    for (const [code, details] of [
      ['UNAUTHORIZED', { reason: 'device_token_mismatch', repairable: true }],
      ['NOT_PAIRED', null],
      ['FORBIDDEN', null],
    ] as const) {
      FakeWebSocket.reset();
      const gw = makeClient();
      gw.start();
      const ws = FakeWebSocket.last();
      ws.serverOpen();
      ws.challenge();
      ws.serverSend({ type: 'res', id: ws.connectFrame().id, ok: false, error: { code, message: 'no', ...(details ? { details } : {}) } });
      expect(get(gw.status)).toMatchObject({ state: 'unauthorized', errorCode: code, errorDetails: details });
      vi.advanceTimersByTime(60_000);
      expect(FakeWebSocket.instances).toHaveLength(1);
      gw.stop();
    }
  });
});

describe('supports', () => {
  it('follows features.callable when the gateway sends it', () => {
    const gw = makeClient();
    gw.start();
    const ws = FakeWebSocket.last();
    ws.serverOpen();
    ws.challenge();
    ws.serverSend({ type: 'res', id: ws.connectFrame().id, ok: true, payload: { type: 'hello-ok', protocol: 1, features: { methods: ['chat.send', 'device.list'], callable: ['chat.send'] }, policy: {} } });
    expect(gw.supports('chat.send')).toBe(true);
    expect(gw.supports('device.list')).toBe(false);
    gw.stop();
  });
});
