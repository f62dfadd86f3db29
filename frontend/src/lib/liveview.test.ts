// The desktop's live view player (liveview.ts) with a scripted MediaSource: chunks appended in order,
// the ones that came before live.open's answer first, the latency figure (gateway age + local wait +
// buffer ahead), the play head kept near the newest data, and the bound on what waits.
import { describe, expect, it } from 'vitest';
import { LivePlayer, LiveRouter, MAX_PENDING_BYTES, b64Bytes, liveSources, median, playableType, type PlayerDeps } from './liveview';

class FakeRanges {
  constructor(public r: [number, number][]) {}
  get length() {
    return this.r.length;
  }
  start(i: number) {
    return this.r[i][0];
  }
  end(i: number) {
    return this.r[i][1];
  }
}
class FakeSB extends EventTarget {
  updating = false;
  appendedBytes: number[] = [];
  removed: [number, number][] = [];
  constructor(private video: FakeVideo) {
    super();
  }
  appendBuffer(b: Uint8Array) {
    this.updating = true;
    this.appendedBytes.push(b.length);
    // Each chunk is half a second of video.
    queueMicrotask(() => {
      const r = this.video.buffered.r;
      if (r.length === 0) r.push([0, 0.5]);
      else r[r.length - 1][1] += 0.5;
      this.updating = false;
      this.dispatchEvent(new Event('updateend'));
    });
  }
  remove(a: number, b: number) {
    this.removed.push([a, b]);
    this.updating = true;
    queueMicrotask(() => {
      this.video.buffered.r[0][0] = b;
      this.updating = false;
      this.dispatchEvent(new Event('updateend'));
    });
  }
}
class FakeMS extends EventTarget {
  static last: FakeMS;
  static video: FakeVideo;
  sb?: FakeSB;
  constructor() {
    super();
    FakeMS.last = this;
  }
  addSourceBuffer(type: string) {
    if (!type.includes('webm')) throw new Error('unsupported');
    this.sb = new FakeSB(FakeMS.video);
    return this.sb;
  }
  static isTypeSupported(t: string) {
    return t.startsWith('video/webm');
  }
}
class FakeVideo {
  src = '';
  muted = false;
  currentTime = 0;
  paused = true;
  buffered = new FakeRanges([]);
  plays = 0;
  async play() {
    this.plays++;
    this.paused = false;
  }
  removeAttribute() {
    this.src = '';
  }
  load() {}
}

function makePlayer() {
  const video = new FakeVideo();
  FakeMS.video = video;
  let clock = 1000;
  const deps: PlayerDeps = { MediaSource: FakeMS as unknown as typeof MediaSource, createObjectURL: () => 'blob:live', revokeObjectURL: () => undefined, now: () => clock };
  const latencies: (number | null)[] = [];
  const errors: string[] = [];
  const p = new LivePlayer(video as unknown as HTMLVideoElement, 'video/webm;codecs=vp8', deps, (ms) => latencies.push(ms), (m) => errors.push(m));
  return { p, video, latencies, errors, tick: (ms: number) => (clock += ms) };
}
const settle = () => new Promise((r) => setTimeout(r, 0));

describe('LivePlayer', () => {
  it('appends in order and reports the latency as gateway age + local wait + buffer ahead', async () => {
    const { p, video, latencies } = makePlayer();
    expect(video.src).toBe('blob:live');
    p.push(new Uint8Array(100), null); // before the source opens: waits
    FakeMS.last.dispatchEvent(new Event('sourceopen'));
    await settle();
    expect(FakeMS.last.sb!.appendedBytes).toEqual([100]);
    expect(latencies).toEqual([]); // no age yet
    expect(video.plays).toBe(1);
    p.push(new Uint8Array(200), 80);
    await settle();
    // buffered 0…1 s, play head at 0: 1000 ms ahead → 80 + 0 + 1000.
    expect(latencies).toEqual([1080]);
    expect(p.appended).toBe(2);
  });

  it('keeps the play head near the newest data and removes what was played', async () => {
    const { p, video } = makePlayer();
    FakeMS.last.dispatchEvent(new Event('sourceopen'));
    for (let i = 0; i < 6; i++) p.push(new Uint8Array(10), 5);
    await settle();
    await settle();
    // 3 s buffered; the play head jumped once it fell over 1.5 s behind (at 2 s: to 1.7 s), and
    // stays where it plays from after that (1.3 s behind).
    expect(video.buffered.end(0)).toBe(3);
    expect(video.currentTime).toBeCloseTo(1.7);
    video.currentTime = 60;
    video.buffered.r[0][1] = 61;
    p.push(new Uint8Array(10), 5);
    await settle();
    await settle();
    expect(FakeMS.last.sb!.removed).toEqual([[0, 40]]);
  });

  it('gives up when more waits than it can play', () => {
    const { p, errors } = makePlayer();
    p.push(new Uint8Array(MAX_PENDING_BYTES), 1);
    p.push(new Uint8Array(1), 1);
    expect(errors).toHaveLength(1);
  });
});

describe('LiveRouter', () => {
  it('keeps the chunks that come before live.open answers and plays them first', async () => {
    const r = new LiveRouter();
    const bytes = (s: string) => btoa(s);
    r.chunk({ viewId: 'v1', data: bytes('ab'), ageMs: 5 });
    r.chunk({ viewId: 'v1', data: bytes('cde') });
    r.chunk({ viewId: 'v2', data: 12 });
    const { p } = makePlayer();
    FakeMS.last.dispatchEvent(new Event('sourceopen'));
    r.attach('v1', p);
    r.chunk({ viewId: 'v1', data: bytes('f') });
    await settle();
    await settle();
    expect(FakeMS.last.sb!.appendedBytes).toEqual([2, 3, 1]);
    r.detach('v1');
  });
});

describe('helpers', () => {
  it('decodes, takes medians, picks a playable type and the sources of a node', () => {
    expect(b64Bytes(btoa('\x00\xff'))).toEqual(new Uint8Array([0, 255]));
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNull();
    expect(playableType(FakeMS as unknown as typeof MediaSource, 'video/webm;codecs=vp8')).toBe('video/webm;codecs=vp8');
    expect(playableType(FakeMS as unknown as typeof MediaSource, 'video/mp4')).toBe('video/webm;codecs="vp8"');
    expect(playableType(undefined, 'video/webm')).toBeNull();
    expect(liveSources({ commands: ['camera.snap', 'screen.live', 'camera.live'] })).toEqual(['camera', 'screen']);
    expect(liveSources({ commands: ['camera.snap'] })).toEqual([]);
  });
});
