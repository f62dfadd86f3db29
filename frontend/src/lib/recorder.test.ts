// camera.clip, screen.snapshot, screen.record and node.media.cancel on the phone page: params, the
// recorder (a scripted MediaRecorder), what is declared where, the refusals, and a cancel that stops
// a recording and a send at once. backend/e2e records with headless Chromium's fake camera and screen.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { clipHandler, clipParams, type CameraDeps } from './camera';
import { sendMedia, TransferError, type MediaFile } from './mediasend';
import { phoneDeclares, serveNode, type InvokeRecord } from './nodeserve';
import { ActiveTransfers, containerOf, durationParam, pickRecorderType, record, serveCancels } from './recorder';
import { SCREEN_UNAVAILABLE, screenCaptureAvailable, screenError, screenHandlers, screenRecordHandler, screenRecordParams, screenSnapParams, screenSnapshotHandler } from './screen';

const ID = '0123456789abcdef0123456789abcdef';

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
  vi.useRealTimers();
  ws.answerAll('node.invoke.result', {}, new Set());
  gw.stop();
});
const results = () => ws.sent.filter((f) => f.method === 'node.invoke.result').map((f) => f.params);

/** A MediaRecorder that hands over one chunk per requestData/timeslice tick and on stop. */
class FakeRecorder {
  static made: FakeRecorder[] = [];
  state: RecordingState = 'inactive';
  mimeType: string;
  ondataavailable: ((e: BlobEvent) => void) | null = null;
  onstop: (() => void) | null = null;
  onerror: ((e: Event) => void) | null = null;
  chunk = new Uint8Array([0x1a, 0x45, 0xdf, 0xa3, 1, 2, 3]);
  constructor(
    readonly stream: MediaStream,
    o?: MediaRecorderOptions,
  ) {
    this.mimeType = o?.mimeType ?? 'video/webm';
    FakeRecorder.made.push(this);
  }
  start() {
    this.state = 'recording';
  }
  /** A timeslice's data. */
  tick(bytes?: Uint8Array) {
    this.ondataavailable?.({ data: new Blob([(bytes ?? this.chunk) as Uint8Array<ArrayBuffer>]) } as BlobEvent);
  }
  stop() {
    this.state = 'inactive';
    setTimeout(() => {
      this.tick();
      this.onstop?.();
    }, 0);
  }
}

function fakeStream(o: { audio?: boolean; width?: number; height?: number } = {}) {
  const stopped: string[] = [];
  const listeners = new Map<string, () => void>();
  const track = (kind: string) => ({
    kind,
    stop: () => stopped.push(kind),
    getSettings: () => (kind === 'video' ? { width: o.width ?? 640, height: o.height ?? 480 } : {}),
    addEventListener: (ev: string, f: () => void) => listeners.set(`${kind}:${ev}`, f),
    removeEventListener: (ev: string) => listeners.delete(`${kind}:${ev}`),
  });
  const video = track('video');
  const tracks = o.audio ? [video, track('audio')] : [video];
  const stream = {
    getTracks: () => tracks,
    getVideoTracks: () => [video],
    getAudioTracks: () => tracks.filter((t) => t.kind === 'audio'),
  } as unknown as MediaStream;
  return { stream, stopped, end: () => listeners.get('video:ended')?.() };
}

function deps(o: Partial<CameraDeps> & { gum?: (c: MediaStreamConstraints) => Promise<MediaStream>; gdm?: (c: DisplayMediaStreamOptions) => Promise<MediaStream> } = {}) {
  const sent: MediaFile[] = [];
  const gumCalls: MediaStreamConstraints[] = [];
  const gdmCalls: DisplayMediaStreamOptions[] = [];
  const d: CameraDeps = {
    mediaDevices: {
      getUserMedia: (c: MediaStreamConstraints) => (gumCalls.push(c), o.gum ? o.gum(c) : Promise.resolve(fakeStream({ audio: !!c.audio }).stream)),
      getDisplayMedia: (c: DisplayMediaStreamOptions) => (gdmCalls.push(c), o.gdm ? o.gdm(c) : Promise.resolve(fakeStream({ width: 800, height: 600 }).stream)),
    } as unknown as MediaDevices,
    document: { visibilityState: 'visible', createElement: document.createElement.bind(document) } as CameraDeps['document'],
    send: async (f) => (sent.push(f), { sha256: 'cd'.repeat(32), blockSize: 65536, blocks: 1, blocksSent: 1, rounds: 1 }),
    grab: async (_d, _s, g) => ({ blob: new Blob([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], { type: g.mime ?? 'image/jpeg' }), width: Math.min(800, g.maxWidth), height: 600 }),
    record: (stream, r) => record(stream, { ...r, MediaRecorder: FakeRecorder as unknown as typeof MediaRecorder, timesliceMs: 10 }),
    isTypeSupported: (t) => t.startsWith('video/webm'),
    ...o,
  };
  return { d, sent, gumCalls, gdmCalls };
}

beforeEach(() => {
  FakeRecorder.made = [];
});

describe('recording params', () => {
  it('camera.clip: defaults, the one-minute bound, and a timeout too short for the clip', () => {
    expect(clipParams({ transfer: { id: ID, maxSize: 1000 } }, 30000)).toEqual({ facing: 'back', durationMs: 5000, includeAudio: true, transferId: ID, maxSize: 1000 });
    expect(clipParams({ transfer: { id: ID }, durationMs: 3000, includeAudio: false, facing: 'front' }, 30000)).toMatchObject({ durationMs: 3000, includeAudio: false, facing: 'front', maxSize: 0 });
    expect(clipParams({ transfer: { id: ID }, durationMs: 60000 }, 90000).durationMs).toBe(60000);
    for (const bad of [{ durationMs: 60001 }, { durationMs: 100 }, { durationMs: '3s' }, { includeAudio: 'yes' }, { facing: 'up' }, { transfer: undefined }]) {
      expect(() => clipParams({ transfer: { id: ID }, ...bad } as Record<string, unknown>, 90000)).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }));
    }
    expect(() => durationParam('camera.clip', 30000, 5000, 30000)).toThrow(/timeoutMs of at least 40000/);
  });
  it('screen commands: format, size, fps', () => {
    expect(screenSnapParams({ transfer: { id: ID } })).toEqual({ format: 'png', maxWidth: 3840, quality: 0.9, transferId: ID });
    expect(screenSnapParams({ transfer: { id: ID }, format: 'jpeg', maxWidth: 640 })).toMatchObject({ format: 'jpeg', maxWidth: 640 });
    expect(() => screenSnapParams({ transfer: { id: ID }, format: 'gif' })).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }));
    expect(screenRecordParams({ transfer: { id: ID } }, 30000)).toEqual({ durationMs: 10000, fps: 10, transferId: ID, maxSize: 0 });
    expect(() => screenRecordParams({ transfer: { id: ID }, fps: 60 }, 30000)).toThrow(/fps must be a number from 1 to 30/);
  });
  it('picks WebM or MP4, whichever the browser records', () => {
    expect(pickRecorderType((t) => t.startsWith('video/webm'), true)).toBe('video/webm;codecs=vp8,opus');
    expect(pickRecorderType((t) => t === 'video/mp4', false)).toBe('video/mp4');
    expect(pickRecorderType(() => false, true)).toBeNull();
    expect(pickRecorderType(undefined, true)).toBeNull();
    expect(containerOf('video/webm;codecs=vp8,opus')).toEqual({ mime: 'video/webm', ext: 'webm' });
    expect(containerOf('video/mp4; codecs="avc1.42E01E"')).toEqual({ mime: 'video/mp4', ext: 'mp4' });
  });
  it('declares the screen commands only where the browser can capture the screen', () => {
    const canvas = ['canvas.a2ui.push', 'canvas.a2ui.reset', 'canvas.eval', 'canvas.hide', 'canvas.navigate', 'canvas.present', 'canvas.snapshot'];
    expect(phoneDeclares(false)).toEqual({ caps: ['camera', 'canvas', 'location', 'system'], commands: ['camera.clip', 'camera.list', 'camera.live', 'camera.snap', ...canvas, 'location.get', 'system.notify'] });
    expect(phoneDeclares(true)).toEqual({
      caps: ['camera', 'canvas', 'location', 'screen', 'system'],
      commands: ['camera.clip', 'camera.list', 'camera.live', 'camera.snap', ...canvas, 'location.get', 'screen.live', 'screen.record', 'screen.snapshot', 'system.notify'],
    });
    expect(screenCaptureAvailable(undefined)).toBe(false);
    expect(screenCaptureAvailable({ getUserMedia: () => undefined } as unknown as MediaDevices)).toBe(false); // Chrome for Android, iOS Safari
    expect(screenCaptureAvailable({ getDisplayMedia: () => undefined } as unknown as MediaDevices)).toBe(true);
    expect(Object.keys(screenHandlers(gw, { mediaDevices: { getUserMedia: () => undefined } as unknown as MediaDevices, document }))).toEqual([]);
  });
});

describe('camera.clip served', () => {
  it('records for durationMs, sends the clip with its duration and type, and names it in the result', async () => {
    const { d, sent, gumCalls } = deps();
    const states: (string | null)[] = [];
    d.onRecording = (c) => states.push(c);
    const log: InvokeRecord[] = [];
    serveNode(gw, { 'camera.clip': clipHandler(d) }, (r) => log.push(r));
    ws.serverEvent('node.invoke.request', { id: 'c1', command: 'camera.clip', params: { durationMs: 600, facing: 'front', transfer: { id: ID, maxSize: 0 } }, timeoutMs: 30000 });
    await vi.waitFor(() => expect(results()).toHaveLength(1), { timeout: 5000 });
    const r = results()[0];
    expect(r).toMatchObject({ id: 'c1', ok: true, media: { id: ID, transport: 'webrtc' } });
    expect(r.payload).toMatchObject({ mime: 'video/webm', mimeType: 'video/webm;codecs=vp8,opus', sha256: 'cd'.repeat(32), width: 640, height: 480, facing: 'front', audio: true });
    expect(r.payload.durationMs).toBeGreaterThanOrEqual(550);
    expect(gumCalls[0]).toMatchObject({ audio: true, video: { facingMode: { ideal: 'user' } } });
    expect(sent[0]).toMatchObject({ id: ID, name: 'clip.webm', mime: 'video/webm', durationMs: r.payload.durationMs, width: 640, height: 480 });
    expect(sent[0].data.length).toBe(r.payload.size);
    expect(FakeRecorder.made[0].mimeType).toBe('video/webm;codecs=vp8,opus');
    expect(states).toEqual(['camera.clip', null]);
    expect(log[0]).toMatchObject({ command: 'camera.clip', ok: true });
  });

  it('stops at the gateway size limit (TOO_LARGE) and when the camera goes away (UNAVAILABLE); tracks are stopped', async () => {
    const big = fakeStream();
    const a = deps({ gum: async () => big.stream, record: (s, r) => record(s, { ...r, MediaRecorder: FakeRecorder as unknown as typeof MediaRecorder, timesliceMs: 10 }) });
    const p = clipHandler(a.d)({ durationMs: 5000, transfer: { id: ID, maxSize: 10 } }, 30000);
    await vi.waitFor(() => expect(FakeRecorder.made).toHaveLength(1));
    FakeRecorder.made[0].tick(new Uint8Array(11));
    await expect(p).rejects.toMatchObject({ code: 'TOO_LARGE' });
    expect(big.stopped).toContain('video');
    expect(a.sent).toHaveLength(0);

    const gone = fakeStream();
    const b = deps({ gum: async () => gone.stream });
    const q = clipHandler(b.d)({ durationMs: 5000, transfer: { id: ID } }, 30000);
    await vi.waitFor(() => expect(FakeRecorder.made).toHaveLength(2));
    gone.end();
    await expect(q).rejects.toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('went away') });
    expect(b.sent).toHaveLength(0);
  });

  it('refuses in the background and without a recorder', async () => {
    const bg = deps();
    (bg.d.document as { visibilityState: string }).visibilityState = 'hidden';
    await expect(clipHandler(bg.d)({ transfer: { id: ID } }, 30000)).rejects.toMatchObject({ code: 'NODE_BACKGROUND_UNAVAILABLE' });
    expect(bg.gumCalls).toHaveLength(0);
    const none = deps({ record: (s, r) => record(s, { ...r, MediaRecorder: undefined }) });
    vi.stubGlobal('MediaRecorder', undefined);
    try {
      await expect(clipHandler(none.d)({ transfer: { id: ID } }, 30000)).rejects.toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('cannot record') });
    } finally {
      vi.unstubAllGlobals();
    }
  });
});

describe('node.media.cancel', () => {
  it('stops a recording at once: CANCELLED, nothing sent, the camera released', async () => {
    const active = new ActiveTransfers();
    const s = fakeStream({ audio: true });
    const { d, sent } = deps({ active, gum: async () => s.stream });
    serveCancels(gw, active);
    serveNode(gw, { 'camera.clip': clipHandler(d) });
    ws.serverEvent('node.invoke.request', { id: 'c2', command: 'camera.clip', params: { durationMs: 60000, transfer: { id: ID } }, timeoutMs: 90000 });
    await vi.waitFor(() => expect(active.size).toBe(1));
    await vi.waitFor(() => expect(FakeRecorder.made).toHaveLength(1));
    ws.serverEvent('node.media.cancel', { transferId: 'ffffffffffffffffffffffffffffffff', code: 'TIMEOUT' }); // another transfer: nothing happens
    expect(FakeRecorder.made[0].state).toBe('recording');
    ws.serverEvent('node.media.cancel', { transferId: ID, code: 'TIMEOUT' });
    await vi.waitFor(() => expect(results()).toHaveLength(1));
    expect(results()[0]).toMatchObject({ id: 'c2', ok: false, error: { code: 'CANCELLED' } });
    expect(FakeRecorder.made[0].state).toBe('inactive');
    expect(s.stopped.sort()).toEqual(['audio', 'video']);
    expect(sent).toHaveLength(0);
    expect(active.size).toBe(0);
  });

  it('stops a send at once: sendMedia closes its connection and rejects CANCELLED', async () => {
    let closed = 0;
    class NeverPC {
      iceGatheringState = 'gathering';
      localDescription = { sdp: 'v=0' };
      createDataChannel() {
        return { addEventListener: () => undefined, set binaryType(_: string) {} } as unknown as RTCDataChannel;
      }
      addEventListener() {}
      async createOffer() {
        return { type: 'offer', sdp: 'v=0' };
      }
      async setLocalDescription() {}
      close() {
        closed++;
      }
    }
    const stop = new AbortController();
    const p = sendMedia({ id: ID, name: 'clip.webm', data: new Uint8Array(10) }, async () => 'v=0', {
      RTCPeerConnection: NeverPC as unknown as typeof RTCPeerConnection,
      signal: stop.signal,
    });
    stop.abort(new Error('the gateway cancelled the transfer (TIMEOUT)'));
    await expect(p).rejects.toSatisfy((e) => e instanceof TransferError && e.code === 'CANCELLED' && /TIMEOUT/.test(e.message));
    expect(closed).toBeGreaterThanOrEqual(1);
    await expect(sendMedia({ id: ID, name: 'x', data: new Uint8Array(1) }, async () => '', { RTCPeerConnection: NeverPC as unknown as typeof RTCPeerConnection, signal: stop.signal })).rejects.toMatchObject({ code: 'CANCELLED' });
  });
});

describe('screen commands served', () => {
  it('screen.snapshot sends a PNG of the shared screen', async () => {
    const { d, sent, gdmCalls } = deps();
    const out = (await screenSnapshotHandler(d)({ transfer: { id: ID } }, 30000)) as { payload: Record<string, unknown>; media: unknown };
    expect(out.payload).toEqual({ width: 800, height: 600, size: 4, sha256: 'cd'.repeat(32), mime: 'image/png' });
    expect(out.media).toEqual({ id: ID, transport: 'webrtc' });
    expect(sent[0]).toMatchObject({ name: 'screen.png', mime: 'image/png', width: 800 });
    expect(gdmCalls[0]).toEqual({ video: true, audio: false });
  });

  it('screen.record records at fps and sends a WebM', async () => {
    const { d, sent, gdmCalls } = deps();
    const out = (await screenRecordHandler(d)({ durationMs: 500, fps: 5, transfer: { id: ID } }, 30000)) as { payload: Record<string, unknown> };
    expect(out.payload).toMatchObject({ mime: 'video/webm', mimeType: 'video/webm;codecs=vp8', width: 800, height: 600, fps: 5 });
    expect(gdmCalls[0]).toEqual({ video: { frameRate: { ideal: 5, max: 5 } }, audio: false });
    expect(sent[0]).toMatchObject({ name: 'screen.webm', mime: 'video/webm' });
  });

  it('says clearly when the browser cannot capture, or the person declined', async () => {
    const none = deps();
    none.d.mediaDevices = { getUserMedia: () => undefined } as unknown as MediaDevices;
    await expect(screenSnapshotHandler(none.d)({ transfer: { id: ID } }, 30000)).rejects.toMatchObject({ code: SCREEN_UNAVAILABLE, hint: 'phone.err.noScreen' });
    const noDisplay = deps({ gdm: () => Promise.reject(new DOMException('Could not start video source', 'NotReadableError')) });
    await expect(screenRecordHandler(noDisplay.d)({ transfer: { id: ID } }, 30000)).rejects.toMatchObject({ code: SCREEN_UNAVAILABLE, message: expect.stringContaining('NotReadableError') });
    expect(screenError('screen.snapshot', new DOMException('denied', 'NotAllowedError'))).toMatchObject({ code: 'FORBIDDEN', hint: 'phone.err.screenDenied' });
    expect(screenError('screen.snapshot', new DOMException('no gesture', 'InvalidStateError'))).toMatchObject({ code: SCREEN_UNAVAILABLE, message: expect.stringContaining('click') });
  });
});
