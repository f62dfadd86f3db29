// The phone page as a node: every node.invoke.request gets one node.invoke.result.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { COARSE_ACCURACY_METERS, CommandError, locationHandler, notifyHandler, serveNode, type InvokeRecord, type LocationAccess } from './nodeserve';

let gw: GatewayClient;
let ws: FakeWebSocket;
beforeEach(() => {
  FakeWebSocket.reset();
  gw = new GatewayClient({ url: 'ws://x/ws', WebSocket: FakeWebSocket, role: 'node' });
  gw.start();
  ws = FakeWebSocket.last();
  ws.handshake();
});
afterEach(() => {
  ws.answerAll('node.invoke.result', {}, new Set());
  gw.stop();
});

function fakeGeo(result: { coords?: Partial<GeolocationCoordinates>; error?: { code: number; message: string } }, seen: PositionOptions[] = []): Geolocation {
  return {
    getCurrentPosition(ok: PositionCallback, fail?: PositionErrorCallback | null, opts?: PositionOptions) {
      seen.push(opts ?? {});
      if (result.error) fail?.(result.error as GeolocationPositionError);
      else ok({ coords: { accuracy: 5, altitude: null, altitudeAccuracy: null, heading: null, speed: null, latitude: 0, longitude: 0, ...result.coords } as GeolocationCoordinates, timestamp: 1700000000000 } as GeolocationPosition);
    },
    watchPosition: () => 0,
    clearWatch: () => undefined,
  } as Geolocation;
}

const results = () => ws.sent.filter((f) => f.method === 'node.invoke.result').map((f) => f.params);

describe('serveNode', () => {
  it('answers location.get with the position, in named units', async () => {
    const seen: PositionOptions[] = [];
    const log: InvokeRecord[] = [];
    serveNode(gw, { 'location.get': locationHandler(fakeGeo({ coords: { latitude: 31.2304, longitude: 121.4737, accuracy: 12 } }, seen), () => 'on') }, (r) => log.push(r));
    ws.serverEvent('node.invoke.request', { id: 'inv-1', command: 'location.get', params: { highAccuracy: true }, timeoutMs: 10000 });
    await vi.waitFor(() => expect(results()).toHaveLength(1));
    expect(results()[0]).toMatchObject({
      id: 'inv-1',
      ok: true,
      payload: { latitude: 31.2304, longitude: 121.4737, accuracyMeters: 12, altitudeMeters: null, timestamp: 1700000000000 },
    });
    expect(seen[0]).toMatchObject({ enableHighAccuracy: true, timeout: 9500 });
    expect(log[0]).toMatchObject({ id: 'inv-1', command: 'location.get', ok: true });
  });

  it('a refused permission, an unknown command, a bad notify: ok false with a code', async () => {
    const notices: string[] = [];
    serveNode(gw, {
      'location.get': locationHandler(fakeGeo({ error: { code: 1, message: 'User denied Geolocation' } }), () => 'on'),
      'system.notify': notifyHandler((t, b) => notices.push(`${t}:${b}`), undefined),
    });
    ws.serverEvent('node.invoke.request', { id: 'a', command: 'location.get', params: {} });
    ws.serverEvent('node.invoke.request', { id: 'b', command: 'system.run', params: { command: ['ls'] } });
    ws.serverEvent('node.invoke.request', { id: 'c', command: 'system.notify', params: {} });
    ws.serverEvent('node.invoke.request', { id: 'd', command: 'system.notify', params: { title: '提醒', body: 'Meeting at 3' } });
    ws.serverEvent('node.invoke.request', { command: 'system.notify', params: { title: 'no id' } }); // ignored
    await vi.waitFor(() => expect(results()).toHaveLength(4));
    const byId = Object.fromEntries(results().map((r) => [r.id, r]));
    expect(byId.a).toMatchObject({ ok: false, error: { code: 'FORBIDDEN' } });
    expect(byId.b).toMatchObject({ ok: false, error: { code: 'INVALID_REQUEST', message: 'this node has no command system.run' } });
    expect(byId.c).toMatchObject({ ok: false, error: { code: 'INVALID_REQUEST' } });
    expect(byId.d).toMatchObject({ ok: true, payload: { delivered: true, via: 'page' } });
    expect(notices).toEqual(['提醒:Meeting at 3']);
  });

  it('location.get: off until the person turns it on, only while the page is in use, coarse and precise', async () => {
    let access: LocationAccess = 'off';
    const seen: PositionOptions[] = [];
    const h = locationHandler(fakeGeo({ coords: { latitude: 31.230416, longitude: 121.473701, accuracy: 12, altitude: 4, speed: 1.5 } }, seen), () => access);
    await expect(h({}, 10000)).rejects.toMatchObject({ code: 'FORBIDDEN', message: expect.stringContaining('location is off on this device') });
    access = 'background';
    await expect(h({}, 10000)).rejects.toMatchObject({ code: 'NODE_BACKGROUND_UNAVAILABLE', message: expect.stringContaining('in the background') });
    expect(seen).toHaveLength(0); // the browser was never asked
    access = 'on';
    await expect(h({ accuracy: 'coarse', highAccuracy: true }, 10000)).resolves.toEqual({
      latitude: 31.23,
      longitude: 121.47,
      accuracyMeters: COARSE_ACCURACY_METERS,
      altitudeMeters: null,
      headingDegrees: null,
      speedMps: null,
      timestamp: 1700000000000,
    });
    expect(seen[0]).toMatchObject({ enableHighAccuracy: false });
    await expect(h({ accuracy: 'precise', maxAgeMs: 0 }, 10000)).resolves.toMatchObject({ latitude: 31.230416, accuracyMeters: 12, altitudeMeters: 4, speedMps: 1.5 });
    expect(seen[1]).toMatchObject({ enableHighAccuracy: true, maximumAge: 0 });
    await h({ accuracy: 'balanced', maxAgeMs: 60000 }, 10000);
    expect(seen[2]).toMatchObject({ enableHighAccuracy: false, maximumAge: 60000 });
  });

  it('system.notify uses the Notification API when the person allowed it', async () => {
    const shown: string[] = [];
    class FakeNotification {
      static permission = 'granted';
      constructor(title: string, o?: NotificationOptions) {
        shown.push(`${title}|${o?.body}`);
      }
    }
    const h = notifyHandler(() => undefined, FakeNotification as unknown as typeof Notification);
    await expect(h({ title: 'T', body: 'B' }, 1000)).resolves.toEqual({ delivered: true, via: 'notification' });
    expect(shown).toEqual(['T|B']);
    FakeNotification.permission = 'default';
    await expect(h({ title: 'T', body: 'B' }, 1000)).resolves.toEqual({ delivered: true, via: 'page' });
  });

  it('a burst: at most maxRunning run, the rest are answered UNAVAILABLE (retryable) at once, every request once', async () => {
    const finish: (() => void)[] = [];
    let started = 0;
    serveNode(
      gw,
      {
        'system.notify': () =>
          new Promise((resolve) => {
            started++;
            finish.push(() => resolve({ delivered: true, via: 'page' }));
          }),
        'location.get': () => {
          throw new CommandError('UNAVAILABLE', 'no geolocation'); // a handler that throws is still answered
        },
      },
      undefined,
      3,
    );
    for (let i = 0; i < 50; i++) ws.serverEvent('node.invoke.request', { id: `r${i}`, command: 'system.notify', params: { title: 't' } });
    await vi.waitFor(() => expect(results()).toHaveLength(47));
    expect(started).toBe(3);
    for (const r of results()) expect(r).toMatchObject({ ok: false, error: { code: 'UNAVAILABLE', retryable: true } });
    finish.forEach((f) => f());
    await vi.waitFor(() => expect(results()).toHaveLength(50));
    const ids = new Set(results().map((r) => r.id));
    expect(ids.size).toBe(50);
    // Places are free again.
    ws.serverEvent('node.invoke.request', { id: 'after', command: 'location.get', params: {} });
    await vi.waitFor(() => expect(results()).toHaveLength(51));
    expect(results()[50]).toMatchObject({ id: 'after', ok: false, error: { code: 'UNAVAILABLE', message: 'no geolocation' } });
    expect(results()[50].error.retryable).toBeUndefined();
  });
});
