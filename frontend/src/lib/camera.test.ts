// The phone page's camera commands: params, the background refusal, permission errors, and the
// result that names the media transfer (the browser parts are faked here; backend/e2e takes a real
// photo with headless Chromium's fake camera).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { BACKGROUND, cameraError, listHandler, scaledSize, snapHandler, snapParams, type CameraDeps } from './camera';
import { serveNode, type InvokeRecord } from './nodeserve';
import type { MediaFile } from './mediasend';

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
  ws.answerAll('node.invoke.result', {}, new Set());
  gw.stop();
});
const results = () => ws.sent.filter((f) => f.method === 'node.invoke.result').map((f) => f.params);

function fakeStream() {
  const stopped: boolean[] = [];
  const track = { stop: () => stopped.push(true) };
  return { stream: { getTracks: () => [track] } as unknown as MediaStream, stopped };
}

function deps(o: Partial<CameraDeps> & { visibility?: DocumentVisibilityState; gum?: () => Promise<MediaStream> } = {}) {
  const calls: MediaStreamConstraints[] = [];
  const sent: MediaFile[] = [];
  const d: CameraDeps = {
    mediaDevices: {
      getUserMedia: (c: MediaStreamConstraints) => (calls.push(c), o.gum ? o.gum() : Promise.resolve(fakeStream().stream)),
    } as unknown as MediaDevices,
    document: { visibilityState: o.visibility ?? 'visible', createElement: document.createElement.bind(document) } as CameraDeps['document'],
    send: async (f) => (sent.push(f), { sha256: 'ab'.repeat(32), blockSize: 65536, blocks: 1, blocksSent: 1, rounds: 1 }),
    grab: async () => ({ blob: new Blob([new Uint8Array([0xff, 0xd8, 1, 2, 3])], { type: 'image/jpeg' }), width: 320, height: 240 }),
    ...o,
  };
  return { d, calls, sent };
}

describe('camera params', () => {
  it('defaults, bounds and the gateway transfer', () => {
    expect(snapParams({ transfer: { id: ID } })).toEqual({ facing: 'back', maxWidth: 1600, quality: 0.85, delayMs: 0, transferId: ID });
    expect(snapParams({ transfer: { id: ID }, facing: 'front', maxWidth: 320, quality: 0.5, delayMs: 100 })).toMatchObject({ facing: 'front', maxWidth: 320 });
    for (const bad of [{}, { transfer: { id: 'x' } }, { transfer: { id: ID }, facing: 'side' }, { transfer: { id: ID }, quality: 2 }, { transfer: { id: ID }, maxWidth: 'big' }]) {
      expect(() => snapParams(bad as Record<string, unknown>)).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }));
    }
  });
  it('scales to maxWidth, keeping the aspect ratio', () => {
    expect(scaledSize(640, 480, 320)).toEqual({ width: 320, height: 240 });
    expect(scaledSize(640, 480, 1600)).toEqual({ width: 640, height: 480 });
    expect(scaledSize(1920, 1080, 333)).toEqual({ width: 333, height: 187 });
  });
  it('maps getUserMedia failures to clear codes', () => {
    expect(cameraError(new DOMException('Permission denied', 'NotAllowedError'))).toMatchObject({ code: 'FORBIDDEN', hint: 'phone.err.cameraDenied' });
    expect(cameraError(new DOMException('Requested device not found', 'NotFoundError'))).toMatchObject({ code: 'UNAVAILABLE', hint: 'phone.err.noCamera' });
  });
});

describe('camera.snap served', () => {
  it('sends the photo for the gateway transfer and names it in the result', async () => {
    const { d, calls, sent } = deps();
    const log: InvokeRecord[] = [];
    serveNode(gw, { 'camera.snap': snapHandler(d) }, (r) => log.push(r));
    ws.serverEvent('node.invoke.request', { id: 'inv-1', command: 'camera.snap', params: { facing: 'front', maxWidth: 320, transfer: { id: ID, maxSize: 0 } }, timeoutMs: 30000 });
    await vi.waitFor(() => expect(results()).toHaveLength(1));
    expect(results()[0]).toEqual({
      id: 'inv-1',
      ok: true,
      payload: { width: 320, height: 240, size: 5, sha256: 'ab'.repeat(32), mime: 'image/jpeg', facing: 'front' },
      media: { id: ID, transport: 'webrtc' },
    });
    expect(sent[0]).toMatchObject({ id: ID, name: 'photo.jpg', mime: 'image/jpeg', width: 320, height: 240 });
    expect(calls[0]).toMatchObject({ audio: false, video: { facingMode: { ideal: 'user' }, width: { ideal: 320 } } });
    expect(log[0]).toMatchObject({ ok: true, payload: { sha256: 'ab'.repeat(32) } });
  });

  it('a page in the background answers NODE_BACKGROUND_UNAVAILABLE at once, without asking for the camera', async () => {
    const { d, calls } = deps({ visibility: 'hidden' });
    const log: InvokeRecord[] = [];
    serveNode(gw, { 'camera.snap': snapHandler(d) }, (r) => log.push(r));
    ws.serverEvent('node.invoke.request', { id: 'bg', command: 'camera.snap', params: { transfer: { id: ID } }, timeoutMs: 30000 });
    await vi.waitFor(() => expect(results()).toHaveLength(1));
    expect(results()[0]).toMatchObject({ id: 'bg', ok: false, error: { code: BACKGROUND } });
    expect(results()[0].error.message).toMatch(/background/);
    expect(results()[0]).not.toHaveProperty('hint');
    expect(log[0]).toMatchObject({ ok: false, hint: 'phone.err.background' });
    expect(calls).toHaveLength(0);
  });

  it('a denied camera is FORBIDDEN with the reason; the stream of a failed grab is stopped', async () => {
    const denied = deps({ gum: () => Promise.reject(new DOMException('Permission denied', 'NotAllowedError')) });
    serveNode(gw, { 'camera.snap': snapHandler(denied.d) });
    ws.serverEvent('node.invoke.request', { id: 'no', command: 'camera.snap', params: { transfer: { id: ID } } });
    await vi.waitFor(() => expect(results()).toHaveLength(1));
    expect(results()[0]).toMatchObject({ ok: false, error: { code: 'FORBIDDEN', message: expect.stringContaining('camera permission denied') } });

    const f = fakeStream();
    const broken = deps({ gum: async () => f.stream, grab: () => Promise.reject(new Error('decode failed')) });
    await expect(snapHandler(broken.d)({ transfer: { id: ID } }, 30000)).rejects.toThrow('decode failed');
    expect(f.stopped).toEqual([true]);
  });

  it('camera.list names the cameras and their side', async () => {
    const md = {
      enumerateDevices: async () => [
        { kind: 'audioinput', deviceId: 'm', label: 'Mic' },
        { kind: 'videoinput', deviceId: 'c1', label: 'Front camera', getCapabilities: () => ({ facingMode: ['user'] }) },
        { kind: 'videoinput', deviceId: 'c2', label: '' },
      ],
    } as unknown as MediaDevices;
    expect(await listHandler({ mediaDevices: md })({}, 1000)).toEqual({
      cameras: [
        { id: 'c1', label: 'Front camera', facing: 'front' },
        { id: 'c2', label: '' },
      ],
    });
  });
});
