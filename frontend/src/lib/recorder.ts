// Recording on the phone page (issue 22): camera.clip and screen.record encode a MediaStream with the
// browser's MediaRecorder, in WebM or MP4, whichever the browser offers (Chromium and Firefox WebM,
// Safari MP4). Also the page's side of node.media.cancel: each media command registers its transfer
// id, and the gateway's cancel stops its recording or its send at once.
import type { GatewayClient } from './gateway';
import { CommandError } from './nodeserve';

/** Clip and recording bounds (ms): at most a minute, as SPEC §7 says for camera.clip. */
export const MIN_DURATION_MS = 500;
export const MAX_DURATION_MS = 60_000;
/** How long the page keeps for sending after a recording, within the invoke's timeoutMs. */
export const SEND_MARGIN_MS = 1_000;

/** MIME types tried in this order; the first MediaRecorder.isTypeSupported accepts is used. */
export const RECORDER_TYPES = {
  audio: ['video/webm;codecs=vp8,opus', 'video/webm;codecs=vp9,opus', 'video/webm', 'video/mp4;codecs=avc1,mp4a.40.2', 'video/mp4'],
  video: ['video/webm;codecs=vp8', 'video/webm;codecs=vp9', 'video/webm', 'video/mp4;codecs=avc1', 'video/mp4'],
} as const;

/** The MediaRecorder type for a recording with or without audio, or null when the browser takes none of them. */
export function pickRecorderType(isTypeSupported: ((t: string) => boolean) | undefined, audio: boolean): string | null {
  if (!isTypeSupported) return null;
  return RECORDER_TYPES[audio ? 'audio' : 'video'].find((t) => isTypeSupported(t)) ?? null;
}

/** A recorded file's MIME type without its parameters, and the file extension for it. */
export function containerOf(mimeType: string): { mime: string; ext: 'webm' | 'mp4' } {
  const mime = mimeType.split(';')[0].trim().toLowerCase();
  return mime.endsWith('/mp4') ? { mime, ext: 'mp4' } : { mime: mime || 'video/webm', ext: 'webm' };
}

/**
 * Checks a recording's durationMs (MIN_DURATION_MS…MAX_DURATION_MS, default def) against the invoke's
 * timeoutMs: the recording and its send must fit in it, else INVALID_REQUEST says what to raise.
 */
export function durationParam(command: string, v: unknown, def: number, timeoutMs: number): number {
  if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isFinite(v) || v < MIN_DURATION_MS || v > MAX_DURATION_MS)) {
    throw new CommandError('INVALID_REQUEST', `${command}: durationMs must be a number from ${MIN_DURATION_MS} to ${MAX_DURATION_MS}`);
  }
  const d = Math.round((v as number | undefined) ?? def);
  if (d + SEND_MARGIN_MS > timeoutMs) {
    throw new CommandError('INVALID_REQUEST', `${command}: a ${d} ms recording does not fit in the invoke's timeoutMs ${timeoutMs}; give timeoutMs of at least ${d + 10_000}`);
  }
  return d;
}

/** What one recording gave. */
export interface Recording {
  data: Uint8Array;
  /** The container's MIME type without parameters ("video/webm", "video/mp4"). */
  mime: string;
  /** MediaRecorder's full type, codecs included. */
  mimeType: string;
  ext: 'webm' | 'mp4';
  /** From the recorder's start to its stop, ms. */
  durationMs: number;
}

export interface RecordOptions {
  command: string;
  durationMs: number;
  /** The recorder's type (pickRecorderType); null lets the browser choose. */
  type: string | null;
  /** Stops with TOO_LARGE when the recording grows past this many bytes (0: no bound here). */
  maxBytes: number;
  /** node.media.cancel: stops at once with CANCELLED. */
  signal?: AbortSignal;
  /** Default the browser's MediaRecorder. */
  MediaRecorder?: typeof MediaRecorder;
  /** Data is handed over every this many ms (default 1000), so maxBytes is checked while recording. */
  timesliceMs?: number;
}

/**
 * Records stream for durationMs. Rejects with a CommandError: CANCELLED (o.signal), TOO_LARGE (over
 * maxBytes), UNAVAILABLE (a track ended: the camera or the shared screen went away), INTERNAL (the
 * recorder failed or gave nothing), TIMEOUT (the recorder did not stop within 10 s of being told to).
 * The stream's tracks are left to the caller.
 */
export function record(stream: MediaStream, o: RecordOptions): Promise<Recording> {
  const MR = o.MediaRecorder ?? globalThis.MediaRecorder;
  if (!MR) return Promise.reject(new CommandError('UNAVAILABLE', `${o.command}: this browser cannot record (no MediaRecorder)`));
  if (o.signal?.aborted) return Promise.reject(new CommandError('CANCELLED', `${o.command}: cancelled by the gateway`));
  let rec: MediaRecorder;
  try {
    rec = new MR(stream, o.type ? { mimeType: o.type } : undefined);
  } catch (e) {
    return Promise.reject(new CommandError('UNAVAILABLE', `${o.command}: this browser cannot record ${o.type ?? 'video'}: ${e instanceof Error ? e.message : String(e)}`));
  }
  return new Promise<Recording>((resolve, reject) => {
    const chunks: Blob[] = [];
    let bytes = 0;
    let failure: CommandError | null = null;
    let startedAt = 0;
    let stoppedAt = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let guard: ReturnType<typeof setTimeout> | undefined;
    const cleanup = () => {
      clearTimeout(timer);
      clearTimeout(guard);
      o.signal?.removeEventListener('abort', onAbort);
      for (const t of stream.getTracks()) t.removeEventListener('ended', onEnded);
    };
    const finish = (err: CommandError | null) => {
      if (stoppedAt) return;
      failure = err;
      stoppedAt = performance.now();
      clearTimeout(timer);
      // A recorder that never says it stopped must not hold the command for ever.
      guard = setTimeout(() => {
        cleanup();
        reject(failure ?? new CommandError('TIMEOUT', `${o.command}: the recorder did not stop`));
      }, 10_000);
      if (rec.state !== 'inactive') rec.stop();
      else done();
    };
    const onAbort = () => finish(new CommandError('CANCELLED', `${o.command}: cancelled by the gateway`));
    const onEnded = () => finish(new CommandError('UNAVAILABLE', `${o.command}: the capture ended after ${Math.round(performance.now() - startedAt)} ms (the camera or the shared screen went away)`));
    const done = () => {
      cleanup();
      if (failure) return reject(failure);
      const blob = new Blob(chunks, { type: rec.mimeType || o.type || '' });
      if (blob.size === 0) return reject(new CommandError('INTERNAL', `${o.command}: the recorder gave no data`));
      const { mime, ext } = containerOf(blob.type);
      blob.arrayBuffer().then(
        (b) => resolve({ data: new Uint8Array(b), mime, mimeType: blob.type, ext, durationMs: Math.round(stoppedAt - startedAt) }),
        (e) => reject(new CommandError('INTERNAL', `${o.command}: read the recording: ${String(e)}`)),
      );
    };
    rec.ondataavailable = (e: BlobEvent) => {
      if (!e.data || e.data.size === 0) return;
      chunks.push(e.data);
      bytes += e.data.size;
      if (o.maxBytes > 0 && bytes > o.maxBytes) finish(new CommandError('TOO_LARGE', `${o.command}: the recording passed the gateway's limit of ${o.maxBytes} bytes`));
    };
    rec.onerror = (e: Event) => finish(new CommandError('INTERNAL', `${o.command}: the recorder failed: ${String((e as ErrorEvent).error ?? e.type)}`));
    rec.onstop = () => done();
    o.signal?.addEventListener('abort', onAbort, { once: true });
    for (const t of stream.getTracks()) t.addEventListener('ended', onEnded);
    try {
      rec.start(o.timesliceMs ?? 1000);
    } catch (e) {
      cleanup();
      reject(new CommandError('INTERNAL', `${o.command}: the recorder did not start: ${e instanceof Error ? e.message : String(e)}`));
      return;
    }
    startedAt = performance.now();
    timer = setTimeout(() => finish(null), o.durationMs);
  });
}

/** The transfers the page is working on, by id, so that node.media.cancel can stop one. */
export class ActiveTransfers {
  private readonly m = new Map<string, AbortController>();

  /** Registers a transfer; its signal aborts on cancel(id). Call end(id) when done. */
  begin(id: string): AbortSignal {
    const c = new AbortController();
    this.m.get(id)?.abort(new Error('a new request for the same transfer'));
    this.m.set(id, c);
    return c.signal;
  }

  end(id: string): void {
    this.m.delete(id);
  }

  /** Stops the transfer id at once (its recording, capture or send); false if it is not running. */
  cancel(id: string, code: string): boolean {
    const c = this.m.get(id);
    if (!c) return false;
    this.m.delete(id);
    c.abort(new Error(`the gateway cancelled the transfer (${code || 'CANCELLED'})`));
    return true;
  }

  get size(): number {
    return this.m.size;
  }
}

/** Acts on node.media.cancel {transferId, code} from gw; returns the function that stops listening. */
export function serveCancels(gw: GatewayClient, active: ActiveTransfers): () => void {
  return gw.on('node.media.cancel', (p) => {
    if (typeof p?.transferId === 'string') active.cancel(p.transferId, typeof p.code === 'string' ? p.code : '');
  });
}
