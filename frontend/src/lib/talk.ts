// Talk (issue 27; docs/PROTOCOL.md "Talk"): the page's ears and mouth for one chat session. The
// page opens a talk (talk.open), offers one RTCPeerConnection with an ordered, reliable data channel
// labelled "atrium-talk" (talk.offer, non-trickle; the page is the offerer), and then:
//   - records each utterance with MediaRecorder (Opus in WebM or Ogg, a 250 ms timeslice) and sends
//     it as 'U' start, 'A' audio parts (uint32 BE seq + bytes, ≤ limits.maxChunkBytes) and 'E' end;
//     push-to-talk (send=false: the transcript comes back in talk.transcript for the person to edit)
//     or continuous (send=true: the gateway sends it as the person's message), where a voice-activity
//     detector (Vad, fed every 20 ms frame of an AnalyserNode by FrameReader, by the audio clock) decides
//     where an utterance starts and ends;
//   - plays what the gateway says: 'S' speech parts assembled per sentence into Blob URLs played by
//     <audio> elements in seq order, 'T' text spoken with speechSynthesis (the browser provider),
//     'R' the reply's end;
//   - interrupts: speech heard while the voice plays stops it at once (the element paused, the queue
//     emptied, speechSynthesis cancelled) and 'I' {replyId} tells the gateway (which cancels the run
//     or lets it finish unspoken, as Settings → Talk says).
// Every gateway call goes through GatewayClient (gateway.ts); every wait has a deadline.
import type { GatewayClient } from './gateway';
import { GatewayError } from './gateway';

export const TALK_LABEL = 'atrium-talk';
/** MediaRecorder's timeslice (ms): an 'A' part about every quarter second. */
export const TIMESLICE_MS = 250;
/** Gathering, ICE, DTLS and the channel opening (ms). */
export const CONNECT_TIMEOUT_MS = 15_000;
/** talk.open / talk.offer / talk.close deadline (ms). */
export const REQUEST_TIMEOUT_MS = 20_000;
/** Bytes queued on the channel above which the talk ends: the network cannot carry the audio. */
export const MAX_BUFFERED = 4 << 20;
/** A sentence's parts held while they arrive, at most (bytes); more ends the talk (bad_stream). */
export const MAX_SENTENCE_BYTES = 8 << 20;
/** Sentences waiting to be played, at most; older ones are dropped first. */
export const MAX_QUEUED_SENTENCES = 64;
/** An audio element that neither ends nor errs within its duration plus this (ms) is skipped. */
export const PLAY_SLACK_MS = 30_000;

export type TalkMode = 'ptt' | 'continuous';
/** What the talk is doing, as shown by the button (gateway states plus the page's own). */
export type TalkState = 'off' | 'opening' | 'idle' | 'listening' | 'recording' | 'transcribing' | 'thinking' | 'speaking';

/** talk.open's answer (docs/PROTOCOL.md "Talk"). */
export interface TalkOpened {
  talkId: string;
  /** `<profileId>/<sessionId>`: the session the talk is bound to (a new one when the page named none). */
  sessionKey?: string;
  mode: TalkMode;
  lang: string;
  stt: { provider: string; model: string };
  tts: { provider: 'openai' | 'elevenlabs' | 'browser' | string; voice?: string; speed?: number; mimeType?: string };
  interrupt: 'cancel' | 'queue';
  limits: { maxUtteranceMs: number; maxUtteranceBytes: number; maxChunkBytes: number };
  /** The VAD's bounds when the gateway sends them (config talk.continuous), else the defaults. */
  continuous?: { silenceMs?: number; minSpeechMs?: number };
}

export const DEFAULT_LIMITS = { maxUtteranceMs: 60_000, maxUtteranceBytes: 2_097_152, maxChunkBytes: 65_536 };

// ---- the channel's messages ----

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A JSON message of type t ('U', 'E', 'I', 'X'): the type byte, then the JSON. */
export function jsonMsg(t: 'U' | 'E' | 'I' | 'X', v: unknown): Uint8Array<ArrayBuffer> {
  const b = enc.encode(JSON.stringify(v));
  const m = new Uint8Array(1 + b.length);
  m[0] = t.charCodeAt(0);
  m.set(b, 1);
  return m;
}

/** The 'A' messages of data: parts of at most maxChunkBytes, numbered from firstSeq (uint32 BE). */
export function audioMsgs(data: Uint8Array, firstSeq: number, maxChunkBytes: number): Uint8Array<ArrayBuffer>[] {
  const out: Uint8Array<ArrayBuffer>[] = [];
  const max = Math.max(1, maxChunkBytes);
  for (let off = 0, seq = firstSeq; off < data.length; off += max, seq++) {
    const part = data.subarray(off, Math.min(off + max, data.length));
    const m = new Uint8Array(5 + part.length);
    m[0] = 'A'.charCodeAt(0);
    new DataView(m.buffer).setUint32(1, seq >>> 0, false);
    m.set(part, 5);
    out.push(m);
  }
  return out;
}

export interface SpeechHeader {
  replyId: string;
  seq: number;
  part: number;
  last: boolean;
  mimeType: string;
  text: string;
}
export type GwMsg =
  | { type: 'S'; header: SpeechHeader; audio: Uint8Array }
  | { type: 'T'; replyId: string; seq: number; text: string; lang: string; rate: number }
  | { type: 'R'; replyId: string; interrupted: boolean }
  | { type: 'X'; reason: string };

const str = (v: unknown) => (typeof v === 'string' ? v : '');
const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);

/** A gateway → page message, or null when it is not one (unknown type, bad JSON or header). */
export function parseMsg(m: Uint8Array): GwMsg | null {
  if (m.length === 0) return null;
  const type = String.fromCharCode(m[0]);
  try {
    if (type === 'S') {
      if (m.length < 5) return null;
      const n = new DataView(m.buffer, m.byteOffset, m.byteLength).getUint32(1, false);
      if (5 + n > m.length) return null;
      const h = JSON.parse(dec.decode(m.subarray(5, 5 + n))) as Record<string, unknown>;
      if (!h || typeof h !== 'object') return null;
      const header: SpeechHeader = {
        replyId: str(h.replyId),
        seq: num(h.seq, 0),
        part: num(h.part, 0),
        last: h.last === true,
        mimeType: str(h.mimeType) || 'audio/mpeg',
        text: str(h.text),
      };
      return { type: 'S', header, audio: m.subarray(5 + n) };
    }
    if (type === 'T' || type === 'R' || type === 'X') {
      const v = JSON.parse(dec.decode(m.subarray(1))) as Record<string, unknown>;
      if (!v || typeof v !== 'object') return null;
      if (type === 'T') return { type, replyId: str(v.replyId), seq: num(v.seq, 0), text: str(v.text), lang: str(v.lang), rate: num(v.rate, 1) };
      if (type === 'R') return { type, replyId: str(v.replyId), interrupted: v.interrupted === true };
      return { type, reason: str(v.reason) };
    }
  } catch {
    return null;
  }
  return null;
}

// ---- voice-activity detection ----

export interface VadOptions {
  /** Speech must last this long (ms) before an utterance starts (config talk.continuous.minSpeechMs; default 300). */
  minSpeechMs?: number;
  /** An utterance ends after this much silence (ms) (config talk.continuous.silenceMs; default 800). */
  silenceMs?: number;
  /** A frame is speech when its RMS is over the noise floor times this (default 3). */
  ratio?: number;
  /** The noise floor never goes under this RMS (default 0.004, about −48 dBFS), so digital silence and faint hiss stay silence. */
  minFloor?: number;
  /** How fast the floor follows quiet frames (0…1 per frame; default 0.05) and loud ones (default 0.002, so a steady noise becomes the floor in time). */
  adaptQuiet?: number;
  adaptLoud?: number;
}
export const VAD_DEFAULTS: Required<VadOptions> = { minSpeechMs: 300, silenceMs: 800, ratio: 3, minFloor: 0.004, adaptQuiet: 0.05, adaptLoud: 0.002 };

/** What one frame changed: onset (first loud frame: start recording, not yet sent), start (speech confirmed), abort (the onset was a click, not speech), end (silenceMs of quiet after speech). */
export type VadEvent = 'onset' | 'start' | 'abort' | 'end' | null;

export function rms(samples: Float32Array): number {
  if (samples.length === 0) return 0;
  let s = 0;
  for (let i = 0; i < samples.length; i++) s += samples[i] * samples[i];
  return Math.sqrt(s / samples.length);
}

/**
 * Speech when the RMS stays over an adaptive noise floor for minSpeechMs, its end after silenceMs
 * of quiet (the hangover). Feed it frames of time-domain samples (−1…1) and their duration.
 */
export class Vad {
  readonly o: Required<VadOptions>;
  private floor: number;
  private loudMs = 0;
  private quietMs = 0;
  private onset = false;
  /** In an utterance (after start, until end). */
  speaking = false;

  constructor(o: VadOptions = {}) {
    this.o = { ...VAD_DEFAULTS, ...Object.fromEntries(Object.entries(o).filter(([, v]) => typeof v === 'number' && Number.isFinite(v))) };
    this.floor = this.o.minFloor;
  }

  /** The noise floor now (RMS). */
  get noiseFloor(): number {
    return this.floor;
  }

  push(samples: Float32Array, durMs: number): VadEvent {
    const level = rms(samples);
    const loud = level > Math.max(this.floor, this.o.minFloor) * this.o.ratio;
    const a = loud ? this.o.adaptLoud : this.o.adaptQuiet;
    this.floor = Math.max(this.o.minFloor, this.floor + (level - this.floor) * a);
    if (this.speaking) {
      if (loud) {
        this.quietMs = 0;
        return null;
      }
      this.quietMs += durMs;
      if (this.quietMs >= this.o.silenceMs) {
        this.speaking = false;
        this.onset = false;
        this.loudMs = 0;
        this.quietMs = 0;
        return 'end';
      }
      return null;
    }
    if (loud) {
      this.quietMs = 0;
      this.loudMs += durMs;
      if (!this.onset) {
        this.onset = true;
        if (this.loudMs >= this.o.minSpeechMs) {
          this.speaking = true;
          return 'start';
        }
        return 'onset';
      }
      if (this.loudMs >= this.o.minSpeechMs) {
        this.speaking = true;
        return 'start';
      }
      return null;
    }
    if (this.onset) {
      // A short gap inside a word does not undo the onset; a longer one does.
      this.quietMs += durMs;
      if (this.quietMs >= Math.min(this.o.silenceMs, 200)) {
        this.onset = false;
        this.loudMs = 0;
        this.quietMs = 0;
        return 'abort';
      }
    }
    return null;
  }
}

/** The VAD's frame (ms). */
export const FRAME_MS = 20;
/** The analyser's window (samples; 341 ms at 48 kHz): the most a late look can still read of what was heard. */
export const VAD_WINDOW = 16_384;

/** What FrameReader needs of an AnalyserNode and its AudioContext. */
export interface AnalyserLike {
  readonly fftSize: number;
  getFloatTimeDomainData(b: Float32Array<ArrayBuffer>): void;
}
export interface AudioClock {
  /** The audio clock (s): it advances with the samples, whatever the page's timers do. */
  readonly currentTime: number;
  readonly sampleRate: number;
}

/**
 * Reads the microphone's new audio from an analyser in whole frames of frameMs, by the audio
 * clock: a look that comes late (a busy page, a slow phone) still gets every frame heard since the
 * last one, up to the analyser's window (fftSize samples); audio older than that is skipped, never
 * counted as speech or silence. (A look that read one window whatever the time since the last one
 * heard a fifth of the speech on a loaded page, and speech that short never started.)
 */
export class FrameReader {
  /** Samples in a frame. */
  readonly frame: number;
  /** A frame's length (ms). */
  readonly frameMs: number;
  private last: number;
  private readonly buf: Float32Array<ArrayBuffer>;

  constructor(
    private readonly an: AnalyserLike,
    private readonly clock: AudioClock,
    frameMs = FRAME_MS,
  ) {
    this.frame = Math.max(1, Math.round((clock.sampleRate * frameMs) / 1000));
    this.frameMs = (this.frame / clock.sampleRate) * 1000;
    this.buf = new Float32Array(an.fftSize);
    this.last = clock.currentTime;
  }

  /** The whole frames heard since the last read, oldest first (views of one buffer: use them before the next read). */
  read(): Float32Array[] {
    const sr = this.clock.sampleRate;
    const win = this.an.fftSize;
    let total = Math.floor((this.clock.currentTime - this.last) * sr + 1e-6);
    if (total > win) {
      // Older than the window: gone. Skip it (not counted as silence or speech).
      this.last += (total - win) / sr;
      total = win;
    }
    const n = Math.floor(total / this.frame);
    if (n <= 0) return [];
    this.an.getFloatTimeDomainData(this.buf);
    // The window's newest sample is now; the unread ones are its last `total`, the oldest first.
    const start = win - total;
    const out: Float32Array[] = [];
    for (let i = 0; i < n; i++) out.push(this.buf.subarray(start + i * this.frame, start + (i + 1) * this.frame));
    this.last += (n * this.frame) / sr;
    return out;
  }
}

// ---- playback ----

/** What the playback queue needs of the page (tests pass fakes). */
export interface PlaybackDeps {
  createAudio: () => AudioLike;
  createObjectURL: (b: Blob) => string;
  revokeObjectURL: (u: string) => void;
  speech?: SpeechLike | null;
  /** Every play / ended / interrupted / error / speak / say / said, for the page's record (data-talk-events; the browser tests read it). */
  onEvent?: (e: TalkEvent) => void;
}
export interface AudioLike {
  src: string;
  paused: boolean;
  ended: boolean;
  currentTime: number;
  duration: number;
  play(): Promise<void>;
  pause(): void;
  addEventListener(type: string, fn: () => void): void;
  removeAttribute(name: string): void;
}
export interface SpeechLike {
  speak(u: SpeechSynthesisUtterance): void;
  cancel(): void;
  readonly speaking: boolean;
}
export interface TalkEvent {
  /** play, ended, interrupted (stopped before its end), error, speak (speechSynthesis.speak called with text), say (the utterance's start event), said (its end event) */
  type: 'play' | 'ended' | 'interrupted' | 'error' | 'speak' | 'say' | 'said';
  replyId: string;
  seq: number;
  /** Where the element was (s) and its length (s) when it stopped (interrupted) or ended. */
  at?: number;
  duration?: number;
  text?: string;
  /** An error's kind: speechSynthesis's SpeechSynthesisErrorEvent.error (e.g. not-allowed, synthesis-failed), or no-events when it fired none in time. */
  why?: string;
}

type Item = { replyId: string; seq: number; kind: 'audio'; url: string; text: string } | { replyId: string; seq: number; kind: 'say'; text: string; lang: string; rate: number };

/** Plays a reply's sentences in seq order (audio Blob URLs, or speechSynthesis for 'T'), one at a time. */
export class Playback {
  private queue: Item[] = [];
  private current: { item: Item; audio?: AudioLike; timer?: ReturnType<typeof setTimeout> } | null = null;
  private parts = new Map<string, { chunks: Uint8Array[]; bytes: number; mimeType: string; text: string }>();
  /** Replies stopped by an interrupt: their later sentences are dropped. */
  private dropped = new Set<string>();
  /** Called when the queue becomes empty or starts playing (speaking true / false). */
  onSpeaking: (speaking: boolean) => void = () => {};

  constructor(private deps: PlaybackDeps) {}

  /** Playing or about to play something. */
  get busy(): boolean {
    return this.current !== null || this.queue.length > 0;
  }

  /** The reply playing now (or next), for 'I'. */
  get replyId(): string {
    return this.current?.item.replyId ?? this.queue[0]?.replyId ?? '';
  }

  /** Takes an 'S' part; a sentence plays once its last part is in. False when the sentence is over MAX_SENTENCE_BYTES. */
  speech(h: SpeechHeader, audio: Uint8Array): boolean {
    if (this.dropped.has(h.replyId)) return true;
    const key = `${h.replyId}\u0000${h.seq}`;
    const p = this.parts.get(key) ?? { chunks: [], bytes: 0, mimeType: h.mimeType, text: h.text };
    p.chunks.push(audio.slice());
    p.bytes += audio.length;
    if (h.text) p.text = h.text;
    if (p.bytes > MAX_SENTENCE_BYTES) {
      this.parts.delete(key);
      return false;
    }
    this.parts.set(key, p);
    if (!h.last) return true;
    this.parts.delete(key);
    const url = this.deps.createObjectURL(new Blob(p.chunks as BlobPart[], { type: p.mimeType }));
    this.enqueue({ replyId: h.replyId, seq: h.seq, kind: 'audio', url, text: p.text });
    return true;
  }

  /** Takes a 'T': spoken with speechSynthesis in its turn. */
  say(replyId: string, seq: number, text: string, lang: string, rate: number): void {
    if (this.dropped.has(replyId) || !text.trim()) return;
    this.enqueue({ replyId, seq, kind: 'say', text, lang, rate });
  }

  /** 'R': the reply is over (its drop mark can go). */
  replyEnd(replyId: string): void {
    this.dropped.delete(replyId);
  }

  private enqueue(it: Item): void {
    // In seq order within a reply; replies in their arrival order.
    let i = this.queue.length;
    while (i > 0 && this.queue[i - 1].replyId === it.replyId && this.queue[i - 1].seq > it.seq) i--;
    this.queue.splice(i, 0, it);
    while (this.queue.length > MAX_QUEUED_SENTENCES) this.release(this.queue.shift() as Item);
    if (!this.current) this.next();
  }

  private release(it: Item): void {
    if (it.kind === 'audio') this.deps.revokeObjectURL(it.url);
  }

  private next(): void {
    const it = this.queue.shift();
    if (!it) {
      if (this.current === null) this.onSpeaking(false);
      return;
    }
    const wasIdle = this.current === null;
    const cur: NonNullable<typeof this.current> = { item: it };
    this.current = cur;
    if (wasIdle) this.onSpeaking(true);
    const done = (type: 'ended' | 'error' | 'said', why?: string) => {
      if (this.current !== cur) return;
      clearTimeout(cur.timer);
      this.deps.onEvent?.({ type, replyId: it.replyId, seq: it.seq, at: cur.audio?.currentTime, duration: cur.audio?.duration, text: it.text, ...(why ? { why } : {}) });
      this.release(it);
      this.current = null;
      this.next();
    };
    if (it.kind === 'audio') {
      const a = this.deps.createAudio();
      cur.audio = a;
      a.addEventListener('play', () => this.current === cur && this.deps.onEvent?.({ type: 'play', replyId: it.replyId, seq: it.seq, text: it.text }));
      a.addEventListener('ended', () => done('ended'));
      a.addEventListener('error', () => done('error'));
      // A duration known once the element has the data bounds how long it may take.
      a.addEventListener('loadedmetadata', () => {
        if (this.current !== cur) return;
        clearTimeout(cur.timer);
        const ms = Number.isFinite(a.duration) ? a.duration * 1000 : 0;
        cur.timer = setTimeout(() => done('error'), ms + PLAY_SLACK_MS);
      });
      cur.timer = setTimeout(() => done('error'), PLAY_SLACK_MS);
      a.src = it.url;
      a.play().catch(() => done('error'));
      return;
    }
    const sp = this.deps.speech;
    const U = (globalThis as { SpeechSynthesisUtterance?: typeof SpeechSynthesisUtterance }).SpeechSynthesisUtterance;
    if (!sp || !U) {
      done('error');
      return;
    }
    const u = new U(it.text);
    if (it.lang) u.lang = it.lang === 'zh' ? 'zh-CN' : it.lang === 'en' ? 'en-US' : it.lang;
    u.rate = Math.min(2, Math.max(0.5, it.rate || 1));
    u.onstart = () => this.current === cur && this.deps.onEvent?.({ type: 'say', replyId: it.replyId, seq: it.seq, text: it.text });
    u.onend = () => done('said');
    u.onerror = (e: SpeechSynthesisErrorEvent) => done('error', e?.error || 'error');
    // Speech synthesis that never starts (no voices on this device) must not hold the queue: a bound by length.
    cur.timer = setTimeout(() => done('error', 'no-events'), PLAY_SLACK_MS + it.text.length * 200);
    this.deps.onEvent?.({ type: 'speak', replyId: it.replyId, seq: it.seq, text: it.text });
    sp.speak(u);
  }

  /** Stops at once (the interrupt): the element paused, the queue emptied, speechSynthesis cancelled; later parts of those replies dropped. Returns the reply that was playing ('' if none). */
  stop(dropReplies = true): string {
    const cur = this.current;
    const replyId = this.replyId;
    this.current = null;
    if (cur) {
      clearTimeout(cur.timer);
      if (cur.audio) {
        cur.audio.pause();
        this.deps.onEvent?.({ type: 'interrupted', replyId: cur.item.replyId, seq: cur.item.seq, at: cur.audio.currentTime, duration: cur.audio.duration, text: cur.item.text });
        cur.audio.removeAttribute('src');
      } else {
        this.deps.speech?.cancel();
        this.deps.onEvent?.({ type: 'interrupted', replyId: cur.item.replyId, seq: cur.item.seq, text: cur.item.text });
      }
      this.release(cur.item);
      if (dropReplies) this.dropped.add(cur.item.replyId);
    }
    for (const it of this.queue) {
      if (dropReplies) this.dropped.add(it.replyId);
      this.release(it);
    }
    this.queue = [];
    this.parts.clear();
    if (cur) this.onSpeaking(false);
    return replyId;
  }
}

// ---- the client ----

/** Why a talk could not start or ended, for the UI: a message key's code and the words. */
export class TalkError extends Error {
  constructor(
    /** TALK_NO_STT, NO_MICROPHONE, MIC_DENIED, NO_RECORDER, NO_RTC, NO_CHANNEL, UNAVAILABLE, FORBIDDEN, TIMEOUT, … (gateway codes pass through). */
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> | null = null,
  ) {
    super(message);
    this.name = 'TalkError';
  }
}

/** The page's parts a talk uses (tests pass fakes; browserTalkDeps() the real ones). */
export interface TalkDeps {
  mediaDevices: MediaDevices | undefined;
  RTCPeerConnection: typeof RTCPeerConnection | undefined;
  MediaRecorder: typeof MediaRecorder | undefined;
  AudioContext: typeof AudioContext | undefined;
  playback: PlaybackDeps;
  now: () => number;
}

export function browserTalkDeps(onEvent?: (e: TalkEvent) => void): TalkDeps {
  const g = globalThis as typeof globalThis & { webkitAudioContext?: typeof AudioContext };
  return {
    mediaDevices: g.navigator?.mediaDevices,
    RTCPeerConnection: g.RTCPeerConnection,
    MediaRecorder: g.MediaRecorder,
    AudioContext: g.AudioContext ?? g.webkitAudioContext,
    playback: {
      createAudio: () => new Audio(),
      createObjectURL: (b) => URL.createObjectURL(b),
      revokeObjectURL: (u) => URL.revokeObjectURL(u),
      speech: g.speechSynthesis ?? null,
      onEvent,
    },
    now: () => performance.now(),
  };
}

/** Opus recorder types, in order; the first MediaRecorder takes is used. */
export const TALK_TYPES = ['audio/webm;codecs=opus', 'audio/ogg;codecs=opus'] as const;

export function pickTalkType(isTypeSupported: ((t: string) => boolean) | undefined): string | null {
  if (!isTypeSupported) return null;
  return TALK_TYPES.find((t) => isTypeSupported(t)) ?? null;
}

export interface TranscriptEvent {
  talkId: string;
  utteranceId: string;
  text: string;
  lang: string;
  durationMs: number;
  sent: boolean;
  /** Sent, but waiting for the session's current answer to end (interrupt "queue", or the session busy). */
  queued?: boolean;
  /** The run answering it, once it was sent (a queued transcript's second event carries it). */
  runId?: string;
  voiceCommand?: { kind: string; applied: boolean | string | number };
  /** A failed utterance's code (TALK_STT_FAILED, TALK_STT_UNREACHABLE, TALK_NO_AUDIO, TALK_STT_BUSY, TALK_SEND_FAILED, TALK_QUEUE_FULL): the page words it (utteranceErrorKey). */
  errorCode?: string;
  /** Its fixed English sentence (never the server's words: the gateway logs those). */
  error?: string;
}

export interface TalkOptions {
  gw: GatewayClient;
  /** `<profileId>/<sessionId>` (docs/PROTOCOL.md). */
  sessionKey: string;
  profileId?: string;
  /** The page's conversation (SPEC §6 conversation domain), as chat.send gives it. */
  conversationId?: string;
  mode: TalkMode;
  lang?: 'auto' | 'en' | 'zh';
  deps: TalkDeps;
  /** What the button shows. */
  onState?: (s: TalkState) => void;
  /** A transcript (sent or for editing). */
  onTranscript?: (t: TranscriptEvent) => void;
  /** The talk ended (reason: the gateway's talk.ended / 'X' reason, or the page's). */
  onEnded?: (reason: string) => void;
  /** Each VAD event, and every 25 frames analysed (ev null): frames is the count so far (the page's record; tests read it). */
  onVad?: (ev: VadEvent, frames: number) => void;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new TalkError('TIMEOUT', `${what} took over ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** getUserMedia failures → TalkError (no microphone, permission refused, in use). */
export function micError(e: unknown): TalkError {
  const name = e && typeof e === 'object' && 'name' in e ? String((e as { name: unknown }).name) : '';
  const msg = e instanceof Error ? e.message : String(e);
  if (name === 'NotAllowedError' || name === 'SecurityError') return new TalkError('MIC_DENIED', `the microphone was not allowed: ${msg}`);
  if (name === 'NotFoundError' || name === 'OverconstrainedError') return new TalkError('NO_MICROPHONE', `no microphone was found: ${msg}`);
  return new TalkError('NO_MICROPHONE', `the microphone could not be opened: ${msg}`);
}

/**
 * One open talk. open() resolves once the channel is open (or rejects with a TalkError); then
 * pttStart/pttStop, setMode, and close(). Gateway events for this talk (talk.transcript,
 * talk.state, talk.ended) come through gw.on.
 */
export class Talk {
  readonly o: TalkOptions;
  opened: TalkOpened | null = null;
  state: TalkState = 'off';
  mode: TalkMode;
  readonly playback: Playback;
  private pc: RTCPeerConnection | null = null;
  private dc: RTCDataChannel | null = null;
  private stream: MediaStream | null = null;
  private ctx: AudioContext | null = null;
  private vadTimer: ReturnType<typeof setInterval> | undefined;
  private poll: ReturnType<typeof setInterval> | undefined;
  private offs: (() => void)[] = [];
  private over = false;
  private vad: Vad = new Vad();
  private utt: {
    id: string;
    send: boolean;
    rec: MediaRecorder;
    started: number;
    /** Announced with 'U' (continuous mode waits for the VAD's start). */
    announced: boolean;
    held: Uint8Array[];
    seq: number;
    bytes: number;
    chain: Promise<void>;
    stopped: boolean;
  } | null = null;
  private gwState: TalkState = 'idle';
  /** Microphone frames the VAD has analysed. */
  frames = 0;
  private type = '';

  constructor(o: TalkOptions) {
    this.o = o;
    this.mode = o.mode;
    this.playback = new Playback(o.deps.playback);
    this.playback.onSpeaking = () => this.show();
  }

  get talkId(): string {
    return this.opened?.talkId ?? '';
  }

  private setState(s: TalkState): void {
    if (this.state === s) return;
    this.state = s;
    this.o.onState?.(s);
  }

  /** The state to show: recording beats speaking beats the gateway's. */
  private show(): void {
    if (this.over) return;
    if (this.utt?.announced || (this.utt && !this.utt.send)) this.setState('recording');
    else if (this.playback.busy) this.setState('speaking');
    else if (this.gwState === 'speaking' || this.gwState === 'idle' || this.gwState === 'listening') this.setState(this.mode === 'continuous' ? 'listening' : 'idle');
    else this.setState(this.gwState);
  }

  /** Opens the talk: the microphone, talk.open, the peer connection and the channel. */
  async open(): Promise<TalkOpened> {
    const d = this.o.deps;
    this.setState('opening');
    try {
      if (!d.mediaDevices?.getUserMedia) throw new TalkError('NO_MICROPHONE', 'this browser gives no microphone access here (it needs HTTPS or localhost, and a microphone)');
      if (!d.RTCPeerConnection) throw new TalkError('NO_RTC', 'this browser has no WebRTC (RTCPeerConnection)');
      const type = pickTalkType(d.MediaRecorder?.isTypeSupported?.bind(d.MediaRecorder));
      if (!d.MediaRecorder || !type) throw new TalkError('NO_RECORDER', 'this browser cannot record Opus audio (MediaRecorder)');
      this.type = type;
      // Ask the gateway first: with nothing configured it says so before the browser asks for the microphone.
      const params: Record<string, unknown> = { sessionKey: this.o.sessionKey, mode: this.o.mode, lang: this.o.lang ?? 'auto' };
      if (this.o.profileId) params.profile = this.o.profileId;
      if (this.o.conversationId) params.conversationId = this.o.conversationId;
      const opened = await this.o.gw.request<TalkOpened>('talk.open', params, { timeoutMs: REQUEST_TIMEOUT_MS });
      if (!opened || typeof opened.talkId !== 'string' || !opened.talkId) throw new TalkError('UNAVAILABLE', 'talk.open answered without a talkId');
      opened.limits = { ...DEFAULT_LIMITS, ...(opened.limits ?? {}) };
      this.opened = opened;
      this.vad = new Vad({ minSpeechMs: opened.continuous?.minSpeechMs, silenceMs: opened.continuous?.silenceMs });
      this.listen();
      await this.connect();
      // The VAD's audio graph runs before the microphone opens, so it hears the first word.
      await this.prepareVad();
      // The microphone last, once the channel is up: the recording starts the moment it is granted.
      try {
        this.stream = await withTimeout(
          d.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true }, video: false }),
          60_000,
          'the microphone permission',
        );
      } catch (e) {
        throw e instanceof TalkError ? e : micError(e);
      }
      if (this.over) throw new TalkError('UNAVAILABLE', 'the talk ended while the microphone was being opened');
      this.startVad();
      this.show();
      return opened;
    } catch (e) {
      await this.close('failed');
      if (e instanceof TalkError) throw e;
      if (e instanceof GatewayError) throw new TalkError(e.code, e.message, e.details);
      throw new TalkError('UNAVAILABLE', e instanceof Error ? e.message : String(e));
    }
  }

  private listen(): void {
    const gw = this.o.gw;
    const mine = (p: { talkId?: unknown }) => p && p.talkId === this.talkId;
    this.offs.push(
      gw.on('talk.transcript', (p) => {
        if (!mine(p)) return;
        this.o.onTranscript?.({
          talkId: this.talkId,
          utteranceId: str(p.utteranceId),
          text: str(p.text),
          lang: str(p.lang),
          durationMs: num(p.durationMs, 0),
          sent: p.sent === true,
          queued: p.queued === true,
          runId: str(p.runId) || undefined,
          voiceCommand: p.voiceCommand && typeof p.voiceCommand === 'object' ? p.voiceCommand : undefined,
          errorCode: str(p.errorCode) || undefined,
          error: str(p.error) || undefined,
        });
      }),
      gw.on('talk.state', (p) => {
        if (!mine(p)) return;
        const s = str(p.state);
        if (['listening', 'transcribing', 'thinking', 'speaking', 'idle'].includes(s)) {
          this.gwState = s as TalkState;
          this.show();
        }
      }),
      gw.on('talk.ended', (p) => mine(p) && void this.close(str(p.reason) || 'closed', false)),
    );
  }

  private async connect(): Promise<void> {
    const PC = this.o.deps.RTCPeerConnection as typeof RTCPeerConnection;
    const pc = new PC({ iceServers: [] });
    this.pc = pc;
    const dc = pc.createDataChannel(TALK_LABEL, { ordered: true });
    dc.binaryType = 'arraybuffer';
    this.dc = dc;
    const opened = new Promise<void>((resolve, reject) => {
      dc.onopen = () => resolve();
      dc.onclose = () => reject(new TalkError('NO_CHANNEL', 'the talk channel closed before it opened'));
    });
    await pc.setLocalDescription(await pc.createOffer());
    await withTimeout(
      new Promise<void>((resolve) => {
        if (pc.iceGatheringState === 'complete') resolve();
        pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
      }),
      CONNECT_TIMEOUT_MS,
      'gathering network candidates',
    );
    const r = await this.o.gw.request<{ sdp?: string }>('talk.offer', { talkId: this.talkId, sdp: pc.localDescription?.sdp ?? '' }, { timeoutMs: REQUEST_TIMEOUT_MS });
    if (typeof r?.sdp !== 'string') throw new TalkError('UNAVAILABLE', 'talk.offer answered without an SDP');
    await pc.setRemoteDescription({ type: 'answer', sdp: r.sdp });
    await withTimeout(opened, CONNECT_TIMEOUT_MS, 'opening the talk channel');
    dc.onclose = () => void this.close('connection_gone', false);
    dc.onmessage = (ev) => this.onMessage(new Uint8Array(ev.data as ArrayBuffer));
    pc.onconnectionstatechange = () => (pc.connectionState === 'failed' || pc.connectionState === 'closed') && void this.close('connection_gone', false);
    // Chromium fires no close on a channel whose connection it closed itself: look now and then.
    this.poll = setInterval(() => dc.readyState !== 'open' && void this.close('connection_gone', false), 1000);
  }

  private onMessage(m: Uint8Array): void {
    const msg = parseMsg(m);
    if (!msg) {
      void this.close('bad_stream', true);
      return;
    }
    switch (msg.type) {
      case 'S':
        if (!this.playback.speech(msg.header, msg.audio)) void this.close('bad_stream', true);
        break;
      case 'T':
        this.playback.say(msg.replyId, msg.seq, msg.text, msg.lang, msg.rate);
        break;
      case 'R':
        this.playback.replyEnd(msg.replyId);
        break;
      case 'X':
        void this.close(msg.reason || 'closed', false);
        break;
    }
  }

  private send(m: Uint8Array<ArrayBuffer>): boolean {
    const dc = this.dc;
    if (!dc || dc.readyState !== 'open') return false;
    if (dc.bufferedAmount > MAX_BUFFERED) {
      void this.close('too_large', true);
      return false;
    }
    dc.send(m);
    return true;
  }

  // ---- the microphone ----

  /** Creates the VAD's AudioContext and waits (at most 5 s) until it runs. Without one, push-to-talk still works. */
  private async prepareVad(): Promise<void> {
    const AC = this.o.deps.AudioContext;
    if (!AC) return;
    try {
      const ctx = new AC();
      this.ctx = ctx;
      if (ctx.state !== 'running') await withTimeout(ctx.resume(), 5000, 'starting the audio analyser').catch(() => undefined);
    } catch {
      this.ctx = null;
    }
  }

  private startVad(): void {
    const ctx = this.ctx;
    if (!ctx || !this.stream) return;
    try {
      const src = ctx.createMediaStreamSource(this.stream);
      const an = ctx.createAnalyser();
      an.fftSize = VAD_WINDOW;
      src.connect(an);
      const reader = new FrameReader(an, ctx);
      // Every 20 ms, or as soon after as a busy page gets to it: all the frames heard since the last look.
      this.vadTimer = setInterval(() => {
        for (const f of reader.read()) {
          const ev = this.vad.push(f, reader.frameMs);
          this.frames++;
          if (ev || this.frames % 25 === 0) this.o.onVad?.(ev, this.frames);
          this.onFrame(ev);
        }
      }, FRAME_MS);
    } catch {
      // No VAD here: push-to-talk still works; continuous mode cannot hear speech begin.
      this.ctx = null;
    }
  }

  /** Acts on a VAD event: continuous mode's utterances, and the interrupt in either mode. */
  onFrame(ev: VadEvent): void {
    if (this.over || !ev) return;
    if (ev === 'start' && this.playback.busy) this.interrupt();
    if (this.mode !== 'continuous') return;
    if (ev === 'onset' && !this.utt) this.beginUtterance(true, false);
    else if (ev === 'start') {
      if (!this.utt) this.beginUtterance(true, true);
      else if (this.utt.send) this.announce();
    } else if (ev === 'abort' && this.utt?.send && !this.utt.announced) this.dropUtterance();
    else if (ev === 'end' && this.utt?.send) this.endUtterance();
  }

  /** Stops the voice at once and tells the gateway ('I'). */
  interrupt(): void {
    const replyId = this.playback.stop(true);
    this.send(jsonMsg('I', replyId ? { replyId } : {}));
    this.show();
  }

  private beginUtterance(send: boolean, announce: boolean): void {
    const Rec = this.o.deps.MediaRecorder;
    if (!Rec || !this.stream) return;
    let rec: MediaRecorder;
    try {
      rec = new Rec(this.stream, { mimeType: this.type, audioBitsPerSecond: 32_000 });
    } catch {
      return;
    }
    const u: NonNullable<Talk['utt']> = {
      id: uuidHex(),
      send,
      rec,
      started: this.o.deps.now(),
      announced: false,
      held: [],
      seq: 0,
      bytes: 0,
      chain: Promise.resolve(),
      stopped: false,
    };
    this.utt = u;
    const limits = this.opened?.limits ?? DEFAULT_LIMITS;
    rec.ondataavailable = (e: BlobEvent) => {
      if (!e.data || e.data.size === 0) return;
      u.chain = u.chain.then(async () => {
        const data = new Uint8Array(await e.data.arrayBuffer());
        if (this.over) return;
        u.bytes += data.length;
        if (u.bytes > limits.maxUtteranceBytes) {
          // The gateway would end the stream (too_large): end this utterance here instead, kept short.
          this.finishUtterance(u);
          return;
        }
        // Held in recording order, and sent from the head once the utterance is announced: a chunk
        // being read when 'U' went out must not overtake the chunks held before it (its first 'A'
        // must be the container's header, or the gateway ends the talk: bad_stream).
        u.held.push(data);
        if (u.announced) this.flush(u);
      });
    };
    rec.onerror = () => this.dropUtterance();
    rec.start(TIMESLICE_MS);
    // An utterance is bounded: at maxUtteranceMs it ends, as if the person stopped.
    setTimeout(() => this.utt === u && !u.stopped && this.finishUtterance(u), Math.max(1000, limits.maxUtteranceMs - 1000));
    if (announce || !send) this.announce();
    this.show();
  }

  /** 'U' and the audio held so far. */
  private announce(): void {
    const u = this.utt;
    if (!u || u.announced) return;
    u.announced = true;
    this.send(jsonMsg('U', { utteranceId: u.id, mimeType: this.type, send: u.send }));
    u.chain = u.chain.then(() => this.flush(u));
    this.show();
  }

  /** Sends an announced utterance's held audio as 'A' parts, oldest first; a channel that refuses drops the rest (the talk is ending). */
  private flush(u: NonNullable<Talk['utt']>): void {
    const limits = this.opened?.limits ?? DEFAULT_LIMITS;
    while (u.held.length > 0) {
      const data = u.held.shift() as Uint8Array;
      for (const m of audioMsgs(data, u.seq, limits.maxChunkBytes)) {
        if (!this.send(m)) {
          u.held = [];
          return;
        }
        u.seq++;
      }
    }
  }

  private dropUtterance(): void {
    const u = this.utt;
    if (!u) return;
    this.utt = null;
    u.stopped = true;
    u.rec.ondataavailable = null;
    try {
      if (u.rec.state !== 'inactive') u.rec.stop();
    } catch {
      /* stopped */
    }
    this.show();
  }

  private endUtterance(): void {
    if (this.utt) this.finishUtterance(this.utt);
  }

  /** Stops the recorder; once its last data is sent, 'E'. */
  private finishUtterance(u: NonNullable<Talk['utt']>): void {
    if (u.stopped) return;
    u.stopped = true;
    const durationMs = Math.round(this.o.deps.now() - u.started);
    const ended = new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 5000); // a recorder that never says it stopped does not hold the talk
      u.rec.addEventListener('stop', () => (clearTimeout(t), resolve()), { once: true });
    });
    try {
      if (u.rec.state !== 'inactive') u.rec.stop();
    } catch {
      /* stopped */
    }
    void ended.then(() =>
      u.chain.then(() => {
        if (this.utt === u) this.utt = null;
        if (!u.announced || this.over) return this.show();
        this.send(jsonMsg('E', { utteranceId: u.id, durationMs }));
        this.gwState = 'transcribing';
        this.show();
      }),
    );
  }

  /** Push-to-talk: starts recording an utterance whose transcript comes back for editing (the voice stops first). */
  pttStart(): void {
    if (this.over || this.utt) return;
    if (this.playback.busy) this.interrupt();
    this.beginUtterance(false, true);
  }

  /** Push-to-talk: ends the utterance (the transcript follows in talk.transcript). */
  pttStop(): void {
    const u = this.utt;
    if (u && !u.send) this.finishUtterance(u);
  }

  get recording(): boolean {
    return this.utt !== null && (this.utt.announced || !this.utt.send);
  }

  /** Continuous on or off (a push-to-talk utterance in progress is not affected). */
  setMode(m: TalkMode): void {
    this.mode = m;
    if (m === 'ptt' && this.utt?.send) {
      if (this.utt.announced) this.endUtterance();
      else this.dropUtterance();
    }
    this.show();
  }

  /** Ends the talk: the gateway told ('X' and talk.close unless it ended it), the microphone released, the voice stopped. */
  async close(reason = 'closed', tell = true): Promise<void> {
    if (this.over) return;
    this.over = true;
    clearInterval(this.vadTimer);
    clearInterval(this.poll);
    this.offs.forEach((f) => f());
    this.offs = [];
    const u = this.utt;
    this.utt = null;
    if (u) {
      u.rec.ondataavailable = null;
      try {
        if (u.rec.state !== 'inactive') u.rec.stop();
      } catch {
        /* stopped */
      }
    }
    this.playback.stop(true);
    if (tell && this.dc?.readyState === 'open') {
      try {
        this.dc.send(jsonMsg('X', { reason }));
      } catch {
        /* closing anyway */
      }
    }
    for (const t of this.stream?.getTracks() ?? []) t.stop();
    this.stream = null;
    void this.ctx?.close().catch(() => undefined);
    this.ctx = null;
    const pc = this.pc;
    this.pc = null;
    // Let the 'X' leave before the connection closes.
    if (pc) setTimeout(() => pc.close(), tell ? 300 : 0);
    if (tell && this.talkId) await this.o.gw.request('talk.close', { talkId: this.talkId }, { timeoutMs: 5000 }).catch(() => undefined);
    this.setState('off');
    this.o.onEnded?.(reason);
  }
}

function uuidHex(): string {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** The words that explain a talk error's code (the UI's message key and what to do). */
export function talkErrorKey(
  code: string,
): 'talk.err.noStt' | 'talk.err.noMic' | 'talk.err.micDenied' | 'talk.err.noRecorder' | 'talk.err.noRtc' | 'talk.err.busy' | 'talk.err.forbidden' | 'talk.err.timeout' | 'talk.err.noChannel' | 'talk.err.other' {
  switch (code) {
    case 'TIMEOUT':
      return 'talk.err.timeout';
    case 'NO_CHANNEL':
      return 'talk.err.noChannel';
    case 'TALK_NO_STT':
      return 'talk.err.noStt';
    case 'NO_MICROPHONE':
      return 'talk.err.noMic';
    case 'MIC_DENIED':
      return 'talk.err.micDenied';
    case 'NO_RECORDER':
      return 'talk.err.noRecorder';
    case 'NO_RTC':
      return 'talk.err.noRtc';
    case 'UNAVAILABLE':
      return 'talk.err.busy';
    case 'FORBIDDEN':
      return 'talk.err.forbidden';
    default:
      return 'talk.err.other';
  }
}

/**
 * The words for a voice that failed (a playback event): an audio element that could not play the
 * speech server's audio (or never ended in time) is 'talk.voiceFailed', speechSynthesis's error
 * 'talk.deviceVoiceFailed' — but not its interrupted or canceled, which a stop causes. Else null.
 * Before, the person heard nothing and saw nothing say why.
 */
export function voiceFailureKey(e: TalkEvent): 'talk.voiceFailed' | 'talk.deviceVoiceFailed' | null {
  if (e.type !== 'error') return null;
  if (e.why === undefined) return 'talk.voiceFailed';
  return e.why === 'interrupted' || e.why === 'canceled' ? null : 'talk.deviceVoiceFailed';
}

/** The words of a failed utterance's code (talk.transcript errorCode); an unknown code or none (an older gateway) is 'talk.uttErr.other'. */
export function utteranceErrorKey(
  code: string | undefined,
): 'talk.uttErr.sttFailed' | 'talk.uttErr.sttUnreachable' | 'talk.uttErr.noAudio' | 'talk.uttErr.sttBusy' | 'talk.uttErr.sendFailed' | 'talk.uttErr.queueFull' | 'talk.uttErr.other' {
  switch (code) {
    case 'TALK_STT_FAILED':
      return 'talk.uttErr.sttFailed';
    case 'TALK_STT_UNREACHABLE':
      return 'talk.uttErr.sttUnreachable';
    case 'TALK_NO_AUDIO':
      return 'talk.uttErr.noAudio';
    case 'TALK_STT_BUSY':
      return 'talk.uttErr.sttBusy';
    case 'TALK_SEND_FAILED':
      return 'talk.uttErr.sendFailed';
    case 'TALK_QUEUE_FULL':
      return 'talk.uttErr.queueFull';
    default:
      return 'talk.uttErr.other';
  }
}

/**
 * Words heard in continuous talk that wait for the session's current answer (interrupt "queue"):
 * the chat shows each as the person's message marked waiting until it is sent. `runId` is set once
 * it was sent (the run answering it): the chat then shows the real message in its place.
 */
export interface WaitingWords {
  utteranceId: string;
  text: string;
  runId?: string;
  /** The talk ended with these words still waiting: the gateway sends them once the answer ends and
   * says nothing more (docs/PROTOCOL.md), so the chat shows them until it has a message of theirs. */
  afterTalk?: boolean;
  /** When they were heard (ms since the epoch): only a message from then on is theirs. */
  at?: number;
  /** When their talk ended (ms since the epoch; set with afterTalk): the page expects them until LEFTOVER_WAIT_MS later. */
  endedAt?: number;
}

/** What one talk.transcript did to the waiting words: the new list, and the words it dropped (never sent) if any. */
export interface WaitingChange {
  waiting: WaitingWords[];
  dropped?: WaitingWords;
}

/**
 * reduceWaiting applies a talk.transcript to the waiting words (docs/PROTOCOL.md "Talk": a queued
 * transcript comes once with `queued`, then again by its utterance id when it was sent — `runId` —
 * or failed — `errorCode`, not sent). A transcript refused at once as TALK_QUEUE_FULL never waited:
 * it is returned as dropped so the page can say which words were not sent. At most
 * MAX_WAITING_WORDS are kept (the gateway's bound is 8): the oldest beyond go.
 */
export function reduceWaiting(list: WaitingWords[], tr: TranscriptEvent, now = Date.now()): WaitingChange {
  const i = list.findIndex((w) => w.utteranceId === tr.utteranceId);
  if (tr.sent && tr.queued && tr.text.trim()) {
    if (i >= 0) return { waiting: list };
    return { waiting: [...list, { utteranceId: tr.utteranceId, text: tr.text, at: now }].slice(-MAX_WAITING_WORDS) };
  }
  if (i < 0) {
    return tr.errorCode === 'TALK_QUEUE_FULL' && tr.text.trim() ? { waiting: list, dropped: { utteranceId: tr.utteranceId, text: tr.text } } : { waiting: list };
  }
  if (tr.sent) return { waiting: list.map((w, j) => (j === i ? { ...w, runId: tr.runId ?? '' } : w)) };
  return { waiting: list.filter((_, j) => j !== i), dropped: list[i] };
}

/** How many waiting words the page shows at most (the gateway lets 8 wait per talk). */
export const MAX_WAITING_WORDS = 16;

/**
 * How long the page expects words that waited when their talk ended (ms): the gateway sends them
 * once the session is free, waiting for it at most backend/talk DefaultLeftoverTimeout (10 min),
 * plus a minute for the sending and the chat's history to show them.
 */
export const LEFTOVER_WAIT_MS = 11 * 60_000;

/**
 * The waiting words the chat can no longer expect (docs/PROTOCOL.md "Talk": after talk.ended the
 * gateway sends them untold): words of an ended talk not in the chat (`arrived` false) once
 * LEFTOVER_WAIT_MS passed since the talk ended (`now`, ms since the epoch), or at once when
 * `reconnectedIdle` — the connection to the gateway was lost and came back, and the chat's history
 * read since has neither them nor a run they could wait behind (a gateway restarted drops them).
 */
export function unexpectedWaiting(list: WaitingWords[], arrived: (w: WaitingWords) => boolean, o: { now: number; reconnectedIdle?: boolean }): WaitingWords[] {
  return list.filter((w) => w.afterTalk === true && !arrived(w) && (o.reconnectedIdle === true || o.now >= (w.endedAt ?? 0) + LEFTOVER_WAIT_MS));
}
