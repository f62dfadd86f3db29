// The phone page's side of a live view (livesend.ts): params, the chunk framing, the clock pong, and
// the handler with a scripted RTCPeerConnection and MediaRecorder: it answers once the channel is
// open, streams chunks, shows the banner, and the person's Stop tells the gateway and ends everything.
// backend/e2e streams from headless Chromium's fake camera to the desktop's player.
import { describe, expect, it, vi } from 'vitest';
import { CHUNK_HEADER, LIVE_LABEL, answerMsg, chunkMsgs, liveHandler, liveParams, type LiveDeps, type LiveWatch } from './livesend';
import { CommandError } from './nodeserve';
import { phoneDeclares } from './nodeserve';
import { FakePC } from './testing/fakeTalk';

const VIEW = '0123456789abcdef0123456789abcdef';
const dec = new TextDecoder();

describe('liveParams', () => {
  it('takes defaults and refuses what is out of bounds', () => {
    expect(liveParams('camera.live', { viewId: VIEW })).toEqual({ viewId: VIEW, fps: 15, maxWidth: 640, facing: 'front', timesliceMs: 250, maxChunkBytes: 262144 });
    for (const bad of [{}, { viewId: 'x' }, { viewId: VIEW, fps: 0 }, { viewId: VIEW, maxWidth: 5000 }, { viewId: VIEW, facing: 'up' }, { viewId: VIEW, timesliceMs: 10 }]) {
      expect(() => liveParams('camera.live', bad)).toThrow(CommandError);
    }
  });
  it('is declared by the phone (screen.live only where it can capture the screen)', () => {
    expect(phoneDeclares(false).commands).toContain('camera.live');
    expect(phoneDeclares(false).commands).not.toContain('screen.live');
    expect(phoneDeclares(true).commands).toContain('screen.live');
  });
});

describe('framing', () => {
  it('cuts a chunk into messages of at most maxChunkBytes with consecutive seqs and one capture time', () => {
    const data = new Uint8Array(40_000).map((_, i) => i & 0xff);
    const ms = chunkMsgs(data, 7, 1234.5, 16_384);
    expect(ms.map((m) => m.length - CHUNK_HEADER)).toEqual([16384, 16384, 7232]);
    const joined: number[] = [];
    ms.forEach((m, k) => {
      const v = new DataView(m.buffer);
      expect(String.fromCharCode(m[0])).toBe('C');
      expect(v.getUint32(1, false)).toBe(7 + k);
      expect(v.getFloat64(5, false)).toBe(1234.5);
      joined.push(...m.subarray(CHUNK_HEADER));
    });
    expect(new Uint8Array(joined)).toEqual(data);
  });
  it('answers a ping with the page clock, and a stop with stop', () => {
    const ping = new Uint8Array([...'P{"t":100.5}'].map((c) => c.charCodeAt(0)));
    const pong = answerMsg(ping, 999) as Uint8Array;
    expect(String.fromCharCode(pong[0])).toBe('Q');
    expect(JSON.parse(dec.decode(pong.subarray(1)))).toEqual({ t: 100.5, n: 999 });
    expect(answerMsg(new Uint8Array([0x58, 0x7b, 0x7d]), 1)).toBe('stop');
    expect(answerMsg(new Uint8Array([0x50, 0x21]), 1)).toBeNull();
    expect(answerMsg(new Uint8Array([0x5a]), 1)).toBeNull();
  });
});

class FakeRecorder {
  static last: FakeRecorder;
  state = 'inactive';
  ondataavailable: ((e: { data: Blob }) => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(
    readonly stream: unknown,
    readonly opts: MediaRecorderOptions & { videoKeyFrameIntervalDuration?: number },
  ) {
    FakeRecorder.last = this;
  }
  start(slice: number) {
    this.state = `recording ${slice}`;
  }
  stop() {
    this.state = 'inactive';
  }
  tick(bytes: Uint8Array) {
    this.ondataavailable?.({ data: new Blob([bytes as Uint8Array<ArrayBuffer>]) });
  }
}

function setup(over: Partial<LiveDeps> = {}) {
  const track = { stopped: false, onended: null as null | (() => void), stop() { this.stopped = true; }, getSettings: () => ({ width: 1280, height: 720 }) };
  const stream = { getTracks: () => [track], getVideoTracks: () => [track] } as unknown as MediaStream;
  const gum = vi.fn(async () => stream);
  const watches: (LiveWatch | null)[] = [];
  const offers: string[] = [];
  const deps: LiveDeps = {
    mediaDevices: { getUserMedia: gum } as unknown as MediaDevices,
    document: { visibilityState: 'visible' },
    signal: async (viewId, sdp) => {
      offers.push(`${viewId} ${sdp}`);
      return 'v=0 answer';
    },
    onWatched: (w) => watches.push(w),
    isTypeSupported: (t) => t === 'video/webm;codecs=vp8',
    RTCPeerConnection: FakePC as unknown as typeof RTCPeerConnection,
    MediaRecorder: FakeRecorder as unknown as typeof MediaRecorder,
    now: () => 5000,
    ...over,
  };
  return { deps, track, gum, watches, offers };
}

const flush = () => new Promise((r) => setTimeout(r, 0));

describe('liveHandler', () => {
  it('opens the channel, answers, streams chunks, answers pings and stops from the page', async () => {
    const { deps, track, gum, watches, offers } = setup();
    const out = await liveHandler('camera', deps)({ viewId: VIEW, fps: 10, maxWidth: 640, facing: 'back', timesliceMs: 250, maxChunkBytes: 16384 }, 30_000);
    expect(out).toEqual({ mimeType: 'video/webm;codecs=vp8', width: 640, height: 360 });
    expect(gum).toHaveBeenCalledWith({ video: { facingMode: 'environment', width: { ideal: 640 }, frameRate: { ideal: 10 } }, audio: false });
    expect(offers).toEqual([`${VIEW} v=0 offer`]);
    const pc = FakePC.last;
    expect(pc.dc.label).toBe(LIVE_LABEL);
    expect(pc.remote).toBe('v=0 answer');
    const rec = FakeRecorder.last;
    expect(rec.state).toBe('recording 250');
    expect(rec.opts).toMatchObject({ mimeType: 'video/webm;codecs=vp8', videoKeyFrameIntervalDuration: 1000 });
    expect(watches).toHaveLength(1);
    expect(watches[0]).toMatchObject({ viewId: VIEW, source: 'camera' });

    rec.tick(new Uint8Array(20000));
    rec.tick(new Uint8Array(10));
    await vi.waitFor(() => expect(pc.dc.types()).toBe('CCC'));
    expect(pc.dc.sent.map((m) => new DataView(m.buffer).getUint32(1, false))).toEqual([0, 1, 2]);

    pc.dc.onmessage?.({ data: new TextEncoder().encode('P{"t":4990}').buffer as ArrayBuffer });
    expect(pc.dc.types()).toBe('CCCQ');

    watches[0]!.stop();
    expect(pc.dc.types()).toBe('CCCQX');
    expect(JSON.parse(dec.decode(pc.dc.sent[4].subarray(1)))).toEqual({ reason: 'stopped' });
    expect(track.stopped).toBe(true);
    expect(rec.state).toBe('inactive');
    expect(watches.at(-1)).toBeNull();
    await vi.waitFor(() => expect(pc.closed).toBe(true));
  });

  it('ends when the gateway says stop, without answering it', async () => {
    const { deps, track, watches } = setup();
    await liveHandler('camera', deps)({ viewId: VIEW }, 30_000);
    const pc = FakePC.last;
    pc.dc.onmessage?.({ data: new TextEncoder().encode('X{"reason":"stopped","by":"viewer"}').buffer as ArrayBuffer });
    expect(track.stopped).toBe(true);
    expect(watches.at(-1)).toBeNull();
    expect(pc.dc.types()).toBe('');
    await flush();
    expect(pc.closed).toBe(true);
  });

  it('refuses in the background, without WebM, and cleans up when the offer fails', async () => {
    const bg = setup({ document: { visibilityState: 'hidden' } });
    await expect(liveHandler('camera', bg.deps)({ viewId: VIEW }, 30_000)).rejects.toMatchObject({ code: 'NODE_BACKGROUND_UNAVAILABLE' });
    expect(bg.gum).not.toHaveBeenCalled();
    const mp4 = setup({ isTypeSupported: (t) => t.startsWith('video/mp4') });
    await expect(liveHandler('camera', mp4.deps)({ viewId: VIEW }, 30_000)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    const refused = setup({
      signal: async () => {
        throw new CommandError('FORBIDDEN', 'node.live.offer: no live view');
      },
    });
    await expect(liveHandler('camera', refused.deps)({ viewId: VIEW }, 30_000)).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(refused.track.stopped).toBe(true);
    expect(refused.watches).toEqual([null]);
    const denied = setup({ mediaDevices: { getUserMedia: async () => Promise.reject(Object.assign(new Error('no'), { name: 'NotAllowedError' })) } as unknown as MediaDevices });
    await expect(liveHandler('camera', denied.deps)({ viewId: VIEW }, 30_000)).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const noScreen = setup();
    await expect(liveHandler('screen', noScreen.deps)({ viewId: VIEW }, 30_000)).rejects.toMatchObject({ code: 'SCREEN_CAPTURE_UNAVAILABLE' });
  });
});
