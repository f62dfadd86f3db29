// Talk's page parts (issue 27): the channel's messages, the voice-activity detector on synthetic
// frames, the playback queue and its interrupt, and the client's open → offer → channel path with a
// scripted gateway and fake browser parts (backend/e2e drives the real ones in headless Chromium).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { FakeChannel, FakePC, FakeRecorder } from './testing/fakeTalk';
import {
  Playback,
  FrameReader,
  Talk,
  TalkError,
  Vad,
  audioMsgs,
  jsonMsg,
  parseMsg,
  pickTalkType,
  reduceWaiting,
  talkErrorKey,
  utteranceErrorKey,
  voiceFailureKey,
  type AudioLike,
  type TalkDeps,
  type TalkEvent,
  type TranscriptEvent,
  type VadEvent,
} from './talk';
import { MESSAGES } from './messages';

const RATE = 16_000;
const FRAME_MS = 20;
const N = (RATE * FRAME_MS) / 1000;

/** A frame of noise at amplitude a (deterministic), plus a tone of amplitude tone (speech-like). */
function frame(i: number, noise: number, tone = 0): Float32Array {
  const f = new Float32Array(N);
  let seed = (i * 7919 + 17) >>> 0;
  for (let k = 0; k < N; k++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    const r = (seed / 0xffffffff) * 2 - 1;
    const t = (i * N + k) / RATE;
    // A voice: 150 Hz and 450 Hz, its loudness rising and falling at 4 Hz (syllables).
    const env = 0.6 + 0.4 * Math.sin(2 * Math.PI * 4 * t);
    f[k] = noise * r + tone * env * (0.7 * Math.sin(2 * Math.PI * 150 * t) + 0.3 * Math.sin(2 * Math.PI * 450 * t));
  }
  return f;
}

function run(vad: Vad, frames: Float32Array[]): { ev: VadEvent; at: number }[] {
  const out: { ev: VadEvent; at: number }[] = [];
  frames.forEach((f, i) => {
    const ev = vad.push(f, FRAME_MS);
    if (ev) out.push({ ev, at: i * FRAME_MS });
  });
  return out;
}
const seconds = (s: number, noise: number, tone = 0, from = 0) => Array.from({ length: (s * 1000) / FRAME_MS }, (_, i) => frame(from + i, noise, tone));

describe('Vad', () => {
  it('never starts on silence: digital zero, faint hiss, or a steady hum that becomes the floor', () => {
    expect(run(new Vad(), seconds(10, 0)).filter((e) => e.ev === 'start')).toEqual([]);
    expect(run(new Vad(), seconds(10, 0.003)).filter((e) => e.ev === 'start')).toEqual([]);
    // A room's noise at −34 dBFS, ten minutes of it: no utterance.
    expect(run(new Vad(), seconds(600, 0.02)).filter((e) => e.ev === 'start')).toEqual([]);
  });

  it('starts on speech after minSpeechMs and ends after silenceMs of quiet (the hangover)', () => {
    const vad = new Vad({ minSpeechMs: 300, silenceMs: 800 });
    const evs = run(vad, [...seconds(1, 0.003), ...seconds(1.5, 0.003, 0.3, 50), ...seconds(2, 0.003, 0, 125)]);
    expect(evs.map((e) => e.ev)).toEqual(['onset', 'start', 'end']);
    const [onset, start, end] = evs;
    expect(onset.at).toBe(1000);
    expect(start.at - onset.at).toBeGreaterThanOrEqual(300 - FRAME_MS);
    // The end comes silenceMs after the speech stopped (at 2500 ms), not before.
    expect(end.at).toBeGreaterThanOrEqual(2500 + 800 - FRAME_MS);
    expect(end.at).toBeLessThanOrEqual(2500 + 800 + FRAME_MS);
    expect(vad.speaking).toBe(false);
  });

  it('a pause shorter than silenceMs stays one utterance', () => {
    const evs = run(new Vad({ silenceMs: 800 }), [...seconds(1, 0.3 * 0, 0.3), ...seconds(0.5, 0.002, 0, 50), ...seconds(1, 0, 0.3, 75), ...seconds(1, 0.002, 0, 125)]);
    expect(evs.map((e) => e.ev)).toEqual(['onset', 'start', 'end']);
  });

  it('a click shorter than minSpeechMs is an onset that is aborted, not speech', () => {
    const evs = run(new Vad({ minSpeechMs: 300 }), [...seconds(1, 0.003), ...seconds(0.1, 0, 0.5, 50), ...seconds(1, 0.003, 0, 55)]);
    expect(evs.map((e) => e.ev)).toEqual(['onset', 'abort']);
  });

  it('hears speech over a steady hum (the floor adapts to the room)', () => {
    const evs = run(new Vad(), [...seconds(3, 0.02), ...seconds(1, 0.02, 0.3, 150), ...seconds(2, 0.02, 0, 200)]);
    expect(evs.map((e) => e.ev)).toEqual(['onset', 'start', 'end']);
  });
});

describe('messages', () => {
  it('encodes U/E/I/X as the type byte and JSON, and A as uint32 BE seq parts of at most maxChunkBytes', () => {
    const u = jsonMsg('U', { utteranceId: 'u1', mimeType: 'audio/webm;codecs=opus', send: true });
    expect(String.fromCharCode(u[0])).toBe('U');
    expect(JSON.parse(new TextDecoder().decode(u.subarray(1)))).toEqual({ utteranceId: 'u1', mimeType: 'audio/webm;codecs=opus', send: true });
    const data = new Uint8Array(10).map((_, i) => i);
    const parts = audioMsgs(data, 7, 4);
    expect(parts.map((p) => new DataView(p.buffer).getUint32(1, false))).toEqual([7, 8, 9]);
    expect(parts.map((p) => Array.from(p.subarray(5)))).toEqual([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]);
    expect(parts.every((p) => p[0] === 'A'.charCodeAt(0))).toBe(true);
  });

  it('parses S (header length, JSON header, audio), T, R and X; refuses what is not one', () => {
    const h = new TextEncoder().encode(JSON.stringify({ replyId: 'r', seq: 2, part: 0, last: true, mimeType: 'audio/wav', text: 'Hi.' }));
    const m = new Uint8Array(5 + h.length + 3);
    m[0] = 'S'.charCodeAt(0);
    new DataView(m.buffer).setUint32(1, h.length, false);
    m.set(h, 5);
    m.set([1, 2, 3], 5 + h.length);
    const s = parseMsg(m);
    expect(s).toMatchObject({ type: 'S', header: { replyId: 'r', seq: 2, last: true, mimeType: 'audio/wav', text: 'Hi.' } });
    expect(Array.from((s as { audio: Uint8Array }).audio)).toEqual([1, 2, 3]);
    const j = (t: string, v: unknown) => new Uint8Array([t.charCodeAt(0), ...new TextEncoder().encode(JSON.stringify(v))]);
    expect(parseMsg(j('T', { replyId: 'r', seq: 0, text: '你好', lang: 'zh', rate: 1.25 }))).toEqual({ type: 'T', replyId: 'r', seq: 0, text: '你好', lang: 'zh', rate: 1.25 });
    expect(parseMsg(j('R', { replyId: 'r', interrupted: true }))).toEqual({ type: 'R', replyId: 'r', interrupted: true });
    expect(parseMsg(j('X', { reason: 'idle' }))).toEqual({ type: 'X', reason: 'idle' });
    expect(parseMsg(j('Q', {}))).toBeNull();
    expect(parseMsg(new Uint8Array([0x53, 0, 0, 0, 99, 1]))).toBeNull(); // header longer than the message
    expect(parseMsg(new Uint8Array([0x54, 0x7b]))).toBeNull(); // bad JSON
    expect(parseMsg(new Uint8Array())).toBeNull();
  });

  it('picks Opus in WebM, else Ogg, else none', () => {
    expect(pickTalkType((t) => t.startsWith('audio/webm'))).toBe('audio/webm;codecs=opus');
    expect(pickTalkType((t) => t.startsWith('audio/ogg'))).toBe('audio/ogg;codecs=opus');
    expect(pickTalkType(() => false)).toBeNull();
    expect(pickTalkType(undefined)).toBeNull();
    expect(talkErrorKey('TALK_NO_STT')).toBe('talk.err.noStt');
    expect(talkErrorKey('WHATEVER')).toBe('talk.err.other');
  });
});

/** An <audio> that plays when told and ends when the test says. */
class FakeAudio implements AudioLike {
  static all: FakeAudio[] = [];
  src = '';
  paused = true;
  ended = false;
  currentTime = 0;
  duration = 2;
  private ls = new Map<string, (() => void)[]>();
  constructor() {
    FakeAudio.all.push(this);
  }
  addEventListener(type: string, fn: () => void) {
    this.ls.set(type, [...(this.ls.get(type) ?? []), fn]);
  }
  fire(type: string) {
    for (const f of this.ls.get(type) ?? []) f();
  }
  play() {
    this.paused = false;
    this.fire('play');
    return Promise.resolve();
  }
  pause() {
    this.paused = true;
  }
  finish() {
    this.currentTime = this.duration;
    this.ended = true;
    this.paused = true;
    this.fire('ended');
  }
  removeAttribute(n: string) {
    if (n === 'src') this.src = '';
  }
}

function playback() {
  FakeAudio.all = [];
  const events: TalkEvent[] = [];
  const urls: string[] = [];
  const revoked: string[] = [];
  let n = 0;
  const p = new Playback({
    createAudio: () => new FakeAudio(),
    createObjectURL: () => {
      const u = `blob:${++n}`;
      urls.push(u);
      return u;
    },
    revokeObjectURL: (u) => revoked.push(u),
    onEvent: (e) => events.push(e),
  });
  return { p, events, urls, revoked };
}
const hdr = (replyId: string, seq: number, last = true, part = 0) => ({ replyId, seq, part, last, mimeType: 'audio/wav', text: `s${seq}` });

describe('Playback', () => {
  it('assembles a sentence from its parts and plays sentences in seq order, one at a time', () => {
    const { p, events, revoked } = playback();
    p.speech(hdr('r', 1, false), new Uint8Array([1]));
    expect(FakeAudio.all).toHaveLength(0); // not its last part yet
    p.speech(hdr('r', 0), new Uint8Array([0]));
    p.speech(hdr('r', 1, true, 1), new Uint8Array([2]));
    expect(FakeAudio.all).toHaveLength(1);
    expect(p.busy).toBe(true);
    FakeAudio.all[0].finish();
    expect(FakeAudio.all).toHaveLength(2);
    FakeAudio.all[1].finish();
    expect(p.busy).toBe(false);
    expect(events.map((e) => `${e.type}:${e.seq}`)).toEqual(['play:0', 'ended:0', 'play:1', 'ended:1']);
    expect(revoked).toHaveLength(2);
  });

  it('stop() pauses the element before its end, empties the queue and drops the rest of that reply', () => {
    const { p, events } = playback();
    let speaking: boolean[] = [];
    p.onSpeaking = (s) => (speaking = [...speaking, s]);
    p.speech(hdr('r', 0), new Uint8Array([0]));
    p.speech(hdr('r', 1), new Uint8Array([1]));
    const a = FakeAudio.all[0];
    a.currentTime = 0.5;
    expect(p.stop()).toBe('r');
    expect(a.paused).toBe(true);
    expect(a.ended).toBe(false);
    expect(p.busy).toBe(false);
    const cut = events.find((e) => e.type === 'interrupted');
    expect(cut).toMatchObject({ replyId: 'r', seq: 0, at: 0.5, duration: 2 });
    p.speech(hdr('r', 2), new Uint8Array([2])); // the gateway had sent it before it read the 'I'
    expect(FakeAudio.all).toHaveLength(1);
    p.replyEnd('r');
    p.speech(hdr('r2', 0), new Uint8Array([3])); // the next reply plays
    expect(FakeAudio.all).toHaveLength(2);
    expect(speaking).toEqual([true, false, true]);
  });

  it('an element that fails moves on to the next sentence', () => {
    const { p, events } = playback();
    p.speech(hdr('r', 0), new Uint8Array([0]));
    p.speech(hdr('r', 1), new Uint8Array([1]));
    FakeAudio.all[0].fire('error');
    expect(FakeAudio.all).toHaveLength(2);
    expect(events.map((e) => e.type)).toEqual(['play', 'error', 'play']);
  });

  it('speaks T with speechSynthesis in its turn, and stop() cancels it', () => {
    const spoken: SpeechSynthesisUtterance[] = [];
    let cancelled = 0;
    class U {
      lang = '';
      rate = 1;
      onstart: (() => void) | null = null;
      onend: (() => void) | null = null;
      onerror: (() => void) | null = null;
      constructor(readonly text: string) {}
    }
    vi.stubGlobal('SpeechSynthesisUtterance', U);
    const events: TalkEvent[] = [];
    const p = new Playback({
      createAudio: () => new FakeAudio(),
      createObjectURL: () => 'blob:x',
      revokeObjectURL: () => {},
      speech: { speak: (u) => spoken.push(u), cancel: () => cancelled++, speaking: false },
      onEvent: (e) => events.push(e),
    });
    p.say('r', 0, '你好。', 'zh', 1.25);
    p.say('r', 1, 'Second.', 'en', 1);
    expect(spoken).toHaveLength(1);
    expect(spoken[0]).toMatchObject({ text: '你好。', lang: 'zh-CN', rate: 1.25 });
    (spoken[0] as unknown as U).onstart?.();
    (spoken[0] as unknown as U).onend?.();
    expect(spoken).toHaveLength(2);
    p.stop();
    expect(cancelled).toBe(1);
    expect(events.map((e) => e.type)).toEqual(['speak', 'say', 'said', 'speak', 'interrupted']);
    expect(events.filter((e) => e.type === 'speak').map((e) => e.text)).toEqual(['你好。', 'Second.']);
    vi.unstubAllGlobals();
  });

  it('a speechSynthesis error is recorded with its kind and the next sentence is spoken', () => {
    const spoken: { text: string; onerror: ((e: { error: string }) => void) | null }[] = [];
    class U {
      onerror: ((e: { error: string }) => void) | null = null;
      constructor(readonly text: string) {}
    }
    vi.stubGlobal('SpeechSynthesisUtterance', U);
    const events: TalkEvent[] = [];
    const p = new Playback({
      createAudio: () => new FakeAudio(),
      createObjectURL: () => 'blob:x',
      revokeObjectURL: () => {},
      speech: { speak: (u) => spoken.push(u as unknown as (typeof spoken)[number]), cancel: () => {}, speaking: false },
      onEvent: (e) => events.push(e),
    });
    p.say('r', 0, 'One.', 'en', 1);
    p.say('r', 1, 'Two.', 'en', 1);
    spoken[0].onerror?.({ error: 'synthesis-failed' });
    expect(spoken.map((u) => u.text)).toEqual(['One.', 'Two.']);
    expect(events.map((e) => [e.type, e.why])).toEqual([['speak', undefined], ['error', 'synthesis-failed'], ['speak', undefined]]);
    p.stop();
    vi.unstubAllGlobals();
  });
});

describe('FrameReader', () => {
  // A microphone at 48 kHz: a quiet room, and a 1.2 s word-like tone (syllables with short gaps) from 1 s.
  const SR = 48_000;
  const sample = (i: number) => {
    const t = i / SR;
    const noise = 0.001 * Math.sin(i * 12.9898);
    const inWord = t >= 1 && t < 2.2 && (t * 1000) % 250 < 200; // 200 ms syllables, 50 ms gaps
    return noise + (inWord ? 0.2 * Math.sin((2 * Math.PI * 220 * i) / SR) : 0);
  };
  function mic(fftSize: number) {
    const clock = { currentTime: 0, sampleRate: SR };
    const an = {
      fftSize,
      getFloatTimeDomainData(b: Float32Array) {
        const now = Math.round(clock.currentTime * SR);
        for (let k = 0; k < b.length; k++) b[k] = sample(now - b.length + k);
      },
    };
    return { clock, an };
  }

  it('a busy page that looks every 100 ms still hears every frame, in order, and the speech starts and ends', () => {
    const { clock, an } = mic(16_384);
    const r = new FrameReader(an, clock);
    const vad = new Vad();
    const events: [string, number][] = [];
    let frames = 0;
    for (let look = 1; look <= 40; look++) {
      clock.currentTime = look * 0.1; // 4 s, a look every 100 ms
      for (const f of r.read()) {
        frames++;
        const ev = vad.push(f, r.frameMs);
        if (ev) events.push([ev, frames * r.frameMs]);
      }
    }
    expect(frames).toBe(200); // 4 s of 20 ms frames: none lost, none counted twice
    const start = events.find(([e]) => e === 'start');
    const end = events.find(([e]) => e === 'end');
    expect(start?.[1]).toBeGreaterThan(1000);
    expect(start?.[1]).toBeLessThan(1500);
    expect(end?.[1]).toBeGreaterThan(2200);
    // The old reading — one analyser window (1024 samples) per look, whatever the time since the last — heard
    // 21 ms of every 100 and never started on this word.
    const old = new Vad();
    const w = mic(1024);
    const buf = new Float32Array(1024);
    const oldEvents: string[] = [];
    for (let look = 1; look <= 40; look++) {
      w.clock.currentTime = look * 0.1;
      w.an.getFloatTimeDomainData(buf);
      const ev = old.push(buf, (1024 / SR) * 1000);
      if (ev) oldEvents.push(ev);
    }
    expect(oldEvents).not.toContain('start');
  });

  it('a look later than the window skips what is gone instead of counting it; a look within a frame reads nothing', () => {
    const { clock, an } = mic(4_800); // 100 ms window
    const r = new FrameReader(an, clock);
    clock.currentTime = 0.01;
    expect(r.read()).toHaveLength(0);
    clock.currentTime = 1; // a 1 s stall: only the last 100 ms are there
    expect(r.read()).toHaveLength(5);
    clock.currentTime = 1.05;
    const f = r.read();
    expect(f).toHaveLength(2);
    expect(f[0][0]).toBeCloseTo(sample(48_000), 6);
    expect(f[1][0]).toBeCloseTo(sample(48_960), 6);
  });
});

// ---- the client against a scripted gateway ----

describe('Talk', () => {
  let gw: GatewayClient;
  let ws: FakeWebSocket;
  let stopped = 0;
  beforeEach(() => {
    FakeWebSocket.reset();
    FakeRecorder.all = [];
    gw = new GatewayClient({ url: 'ws://x/ws', WebSocket: FakeWebSocket });
    gw.start();
    ws = FakeWebSocket.last();
    ws.handshake();
    stopped = 0;
  });
  afterEach(() => gw.stop());

  function deps(o: Partial<TalkDeps> = {}): TalkDeps {
    return {
      mediaDevices: { getUserMedia: async () => ({ getTracks: () => [{ stop: () => stopped++ }] }) } as unknown as MediaDevices,
      RTCPeerConnection: FakePC as unknown as typeof RTCPeerConnection,
      MediaRecorder: FakeRecorder as unknown as typeof MediaRecorder,
      AudioContext: undefined,
      playback: { createAudio: () => new FakeAudio(), createObjectURL: () => 'blob:x', revokeObjectURL: () => {} },
      now: () => Date.now(),
      ...o,
    };
  }
  const flush = async () => {
    for (let i = 0; i < 20; i++) await Promise.resolve();
    await new Promise((r) => setTimeout(r, 0));
  };
  const answer = async (method: string, payload: unknown) => {
    await vi.waitFor(() => expect(ws.sent.some((f) => f.method === method && !f.answered)).toBe(true));
    const f = ws.sent.find((x) => x.method === method && !x.answered)!;
    f.answered = true;
    ws.reply(f, payload);
    return f.params;
  };
  const OPENED = { talkId: 't1', mode: 'ptt', lang: 'auto', stt: { provider: 'openai', model: 'whisper-1' }, tts: { provider: 'openai', voice: 'alloy', speed: 1 }, interrupt: 'cancel', limits: { maxUtteranceMs: 60000, maxUtteranceBytes: 2097152, maxChunkBytes: 4 } };
  const types = (dc: FakeChannel) => dc.sent.map((m) => String.fromCharCode(m[0]));

  it('opens (talk.open, then talk.offer with the offer), records a push-to-talk utterance as U, A…, E, and hands the transcript over', async () => {
    const transcripts: string[] = [];
    const talk = new Talk({ gw, sessionKey: 'main/s1', profileId: 'main', mode: 'ptt', deps: deps(), onTranscript: (t) => transcripts.push(t.text) });
    const opening = talk.open();
    expect(await answer('talk.open', OPENED)).toMatchObject({ sessionKey: 'main/s1', mode: 'ptt', lang: 'auto' });
    expect(await answer('talk.offer', { sdp: 'v=0 answer' })).toEqual({ talkId: 't1', sdp: 'v=0 offer' });
    await opening;
    const pc = FakePC.last;
    expect(pc.dc.label).toBe('atrium-talk');
    expect(pc.remote).toBe('v=0 answer');
    talk.pttStart();
    expect(talk.state).toBe('recording');
    FakeRecorder.all[0].data([1, 2, 3, 4, 5, 6]);
    await flush();
    talk.pttStop();
    await flush();
    expect(types(pc.dc)).toEqual(['U', 'A', 'A', 'A', 'E']);
    const u = JSON.parse(new TextDecoder().decode(pc.dc.sent[0].subarray(1)));
    expect(u).toMatchObject({ mimeType: 'audio/webm;codecs=opus', send: false });
    expect(pc.dc.sent.slice(1, 4).map((m) => new DataView(m.buffer).getUint32(1, false))).toEqual([0, 1, 2]);
    ws.serverEvent('talk.transcript', { talkId: 't1', utteranceId: u.utteranceId, text: 'hello there', lang: 'en', durationMs: 900, sent: false });
    ws.serverEvent('talk.transcript', { talkId: 'other', utteranceId: 'x', text: 'not mine', sent: false });
    expect(transcripts).toEqual(['hello there']);
    const closing = talk.close();
    await answer('talk.close', { closed: true });
    await closing;
    expect(stopped).toBe(1);
    expect(types(pc.dc).at(-1)).toBe('X');
  });

  it('continuous: an onset records but sends nothing until the VAD confirms speech; an aborted onset sends nothing at all', async () => {
    const talk = new Talk({ gw, sessionKey: 'main/s1', mode: 'continuous', deps: deps() });
    const opening = talk.open();
    await answer('talk.open', { ...OPENED, mode: 'continuous' });
    await answer('talk.offer', { sdp: 'a' });
    await opening;
    const dc = FakePC.last.dc;
    talk.onFrame('onset');
    FakeRecorder.all[0].data([1]);
    await flush();
    talk.onFrame('abort');
    await flush();
    expect(types(dc)).toEqual([]);
    talk.onFrame('onset');
    FakeRecorder.all[1].data([1, 2]);
    await flush();
    expect(types(dc)).toEqual([]);
    talk.onFrame('start');
    await flush();
    expect(types(dc)).toEqual(['U', 'A']);
    expect(JSON.parse(new TextDecoder().decode(dc.sent[0].subarray(1)))).toMatchObject({ send: true });
    talk.onFrame('end');
    await flush();
    expect(types(dc)).toEqual(['U', 'A', 'A', 'E']);
    const closing = talk.close();
    await answer('talk.close', { closed: true });
    await closing;
  });

  it('continuous: a chunk still being read when the speech is confirmed goes after the chunks held before it (the header first)', async () => {
    const talk = new Talk({ gw, sessionKey: 'main/s1', mode: 'continuous', deps: deps() });
    const opening = talk.open();
    await answer('talk.open', { ...OPENED, mode: 'continuous', limits: { ...OPENED.limits, maxChunkBytes: 65536 } });
    await answer('talk.offer', { sdp: 'a' });
    await opening;
    const dc = FakePC.last.dc;
    talk.onFrame('onset');
    FakeRecorder.all[0].data([0x1a, 0x45, 0xdf, 0xa3, 1]); // the WebM header, held
    await flush();
    FakeRecorder.all[0].data([7]); // the next chunk: its bytes are still being read when…
    talk.onFrame('start'); // …the speech is confirmed and 'U' goes out
    await flush();
    const as = dc.sent.filter((m) => m[0] === 'A'.charCodeAt(0));
    expect(types(dc)).toEqual(['U', 'A', 'A']);
    expect(as.map((m) => new DataView(m.buffer).getUint32(1, false))).toEqual([0, 1]);
    expect([...as[0].subarray(5)]).toEqual([0x1a, 0x45, 0xdf, 0xa3, 1]);
    expect([...as[1].subarray(5)]).toEqual([7]);
    const closing = talk.close();
    await answer('talk.close', { closed: true });
    await closing;
  });

  it('speech heard while the voice plays stops it at once and sends I with the reply', async () => {
    const talk = new Talk({ gw, sessionKey: 'main/s1', mode: 'continuous', deps: deps() });
    const opening = talk.open();
    await answer('talk.open', OPENED);
    await answer('talk.offer', { sdp: 'a' });
    await opening;
    const dc = FakePC.last.dc;
    FakeAudio.all = [];
    const h = new TextEncoder().encode(JSON.stringify({ replyId: 'run1', seq: 0, part: 0, last: true, mimeType: 'audio/wav', text: 'Hi.' }));
    const m = new Uint8Array(5 + h.length + 1);
    m[0] = 0x53;
    new DataView(m.buffer).setUint32(1, h.length, false);
    m.set(h, 5);
    dc.onmessage?.({ data: m.buffer });
    expect(talk.state).toBe('speaking');
    const a = FakeAudio.all[0];
    expect(a.paused).toBe(false);
    talk.onFrame('onset');
    expect(a.paused).toBe(false); // a click is no interrupt
    talk.onFrame('start');
    expect(a.paused).toBe(true);
    expect(a.ended).toBe(false);
    const i = dc.sent.find((x) => x[0] === 'I'.charCodeAt(0))!;
    expect(JSON.parse(new TextDecoder().decode(i.subarray(1)))).toEqual({ replyId: 'run1' });
    const closing = talk.close();
    await answer('talk.close', { closed: true });
    await closing;
  });

  it('TALK_NO_STT comes back as a TalkError with its details, before the microphone is asked for', async () => {
    let asked = 0;
    const talk = new Talk({
      gw,
      sessionKey: 'main/s1',
      mode: 'ptt',
      deps: deps({ mediaDevices: { getUserMedia: async () => (asked++, { getTracks: () => [] }) } as unknown as MediaDevices }),
    });
    const opening = talk.open();
    await vi.waitFor(() => expect(ws.sent.some((f) => f.method === 'talk.open')).toBe(true));
    const f = ws.sent.find((x) => x.method === 'talk.open')!;
    ws.serverSend({ type: 'res', id: f.id, ok: false, error: { code: 'TALK_NO_STT', message: 'no transcription server is set', details: { setting: 'talk.stt' } } });
    const err = await opening.catch((e) => e);
    expect(err).toBeInstanceOf(TalkError);
    expect(err).toMatchObject({ code: 'TALK_NO_STT', details: { setting: 'talk.stt' } });
    expect(asked).toBe(0);
    expect(talk.state).toBe('off');
  });

  it('a browser without a microphone or recorder says so without asking the gateway', async () => {
    const a = new Talk({ gw, sessionKey: 'k', mode: 'ptt', deps: deps({ mediaDevices: undefined }) });
    await expect(a.open()).rejects.toMatchObject({ code: 'NO_MICROPHONE' });
    const b = new Talk({ gw, sessionKey: 'k', mode: 'ptt', deps: deps({ MediaRecorder: undefined }) });
    await expect(b.open()).rejects.toMatchObject({ code: 'NO_RECORDER' });
    expect(ws.sent.some((f) => f.method === 'talk.open')).toBe(false);
  });

  it('a failed utterance comes with its code, worded by the page in English and Chinese (never the server’s words)', async () => {
    const got: TranscriptEvent[] = [];
    const talk = new Talk({ gw, sessionKey: 'k', mode: 'ptt', deps: deps(), onTranscript: (t) => got.push(t) });
    const opening = talk.open();
    await answer('talk.open', OPENED);
    await answer('talk.offer', { sdp: 'a' });
    await opening;
    ws.serverEvent('talk.transcript', { talkId: 't1', utteranceId: 'u1', text: '', lang: 'en', durationMs: 900, sent: false, errorCode: 'TALK_STT_FAILED', error: 'the transcription server could not transcribe the utterance' });
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ errorCode: 'TALK_STT_FAILED', text: '' });
    expect(utteranceErrorKey(got[0].errorCode)).toBe('talk.uttErr.sttFailed');
    // A server not running said "could not transcribe … (what it answered is in Atrium's log)": it answered nothing.
    for (const [code, key] of [['TALK_STT_UNREACHABLE', 'talk.uttErr.sttUnreachable'], ['TALK_NO_AUDIO', 'talk.uttErr.noAudio'], ['TALK_STT_BUSY', 'talk.uttErr.sttBusy'], ['TALK_SEND_FAILED', 'talk.uttErr.sendFailed'], ['TALK_QUEUE_FULL', 'talk.uttErr.queueFull'], [undefined, 'talk.uttErr.other'], ['NEW', 'talk.uttErr.other']] as const) {
      expect(utteranceErrorKey(code)).toBe(key);
      expect(MESSAGES[key][0]).toBeTruthy();
      expect(MESSAGES[key][1]).toMatch(/[\u4e00-\u9fff]/);
    }
    const closing = talk.close();
    await answer('talk.close', { closed: true });
    await closing;
  });

  it('talk.ended from the gateway ends the talk and releases the microphone', async () => {
    const ended: string[] = [];
    const talk = new Talk({ gw, sessionKey: 'k', mode: 'ptt', deps: deps(), onEnded: (r) => ended.push(r) });
    const opening = talk.open();
    await answer('talk.open', OPENED);
    await answer('talk.offer', { sdp: 'a' });
    await opening;
    ws.serverEvent('talk.ended', { talkId: 't1', reason: 'idle' });
    await flush();
    expect(ended).toEqual(['idle']);
    expect(stopped).toBe(1);
    expect(talk.state).toBe('off');
  });
});

// A voice that failed was silent: the person heard nothing and saw nothing say why (a speech server's
// audio the browser cannot play, a device with no voice for the language). Each failure has its words;
// a stop's speechSynthesis errors (interrupted, canceled) are no failure. The page's own failures to
// connect have theirs too (a channel that closed before it opened said "Another talk is open").
describe('what a failure says', () => {
  it('words a voice that failed, not one that was stopped', () => {
    expect(voiceFailureKey({ type: 'error', replyId: 'r', seq: 0, at: 0, duration: NaN })).toBe('talk.voiceFailed');
    expect(voiceFailureKey({ type: 'error', replyId: 'r', seq: 0, why: 'synthesis-failed' })).toBe('talk.deviceVoiceFailed');
    expect(voiceFailureKey({ type: 'error', replyId: 'r', seq: 0, why: 'no-events' })).toBe('talk.deviceVoiceFailed');
    expect(voiceFailureKey({ type: 'error', replyId: 'r', seq: 0, why: 'interrupted' })).toBeNull();
    expect(voiceFailureKey({ type: 'error', replyId: 'r', seq: 0, why: 'canceled' })).toBeNull();
    for (const type of ['play', 'ended', 'interrupted', 'speak', 'say', 'said'] as const) expect(voiceFailureKey({ type, replyId: 'r', seq: 0 })).toBeNull();
  });
  it('words the page\'s own failures to connect', () => {
    expect(talkErrorKey('TIMEOUT')).toBe('talk.err.timeout');
    expect(talkErrorKey('NO_CHANNEL')).toBe('talk.err.noChannel');
    expect(talkErrorKey('UNAVAILABLE')).toBe('talk.err.busy');
    expect(talkErrorKey('SOMETHING_NEW')).toBe('talk.err.other');
  });
});

describe('words waiting for the current answer (interrupt "queue")', () => {
  const tr = (over: Partial<TranscriptEvent>): TranscriptEvent => ({ talkId: 't1', utteranceId: 'u1', text: 'And tomorrow?', lang: 'en', durationMs: 900, sent: true, ...over });

  it('shows each queued transcript until it is sent, then marks it with its run', () => {
    let c = reduceWaiting([], tr({ queued: true }), 1000);
    c = reduceWaiting(c.waiting, tr({ utteranceId: 'u2', text: '后天呢？', queued: true }), 2000);
    expect(c.waiting).toEqual([
      { utteranceId: 'u1', text: 'And tomorrow?', at: 1000 },
      { utteranceId: 'u2', text: '后天呢？', at: 2000 },
    ]);
    expect(reduceWaiting(c.waiting, tr({ queued: true })).waiting).toBe(c.waiting); // said once, shown once
    c = reduceWaiting(c.waiting, tr({ runId: 'r2' }));
    expect(c.dropped).toBeUndefined();
    expect(c.waiting).toEqual([
      { utteranceId: 'u1', text: 'And tomorrow?', at: 1000, runId: 'r2' },
      { utteranceId: 'u2', text: '后天呢？', at: 2000 },
    ]);
  });

  it('drops a waiting transcript whose send failed, and says a refused one (TALK_QUEUE_FULL) was never sent', () => {
    const c = reduceWaiting([], tr({ queued: true }), 1000);
    const failed = reduceWaiting(c.waiting, tr({ sent: false, errorCode: 'TALK_SEND_FAILED' }));
    expect(failed.waiting).toEqual([]);
    expect(failed.dropped).toEqual({ utteranceId: 'u1', text: 'And tomorrow?', at: 1000 });
    const full = reduceWaiting(c.waiting, tr({ utteranceId: 'u9', text: 'One more?', sent: false, errorCode: 'TALK_QUEUE_FULL' }));
    expect(full.waiting).toBe(c.waiting);
    expect(full.dropped).toEqual({ utteranceId: 'u9', text: 'One more?' });
    // A transcript sent at once, or put in the input (push-to-talk), never waits.
    expect(reduceWaiting([], tr({ runId: 'r1' })).waiting).toEqual([]);
    expect(reduceWaiting([], tr({ sent: false })).waiting).toEqual([]);
  });
});
