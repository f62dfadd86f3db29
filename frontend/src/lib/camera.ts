// The phone page's camera as a node (issue 22): camera.list, camera.snap and camera.clip. A photo is taken with
// getUserMedia, drawn on a canvas scaled to maxWidth and encoded by canvas.toBlob('image/jpeg'), then
// sent to the gateway over a WebRTC data channel (mediasend.ts) for the transfer the gateway named in
// the request's params (transfer:{id, maxSize}); the result names the transfer (docs/PROTOCOL.md
// "Media transfers"). A page in the background cannot use the camera (browsers pause or refuse it):
// it answers NODE_BACKGROUND_UNAVAILABLE at once instead of waiting for the person to come back.
// A clip is recorded with MediaRecorder (recorder.ts). node.media.cancel stops a command's capture,
// recording or send at once (ActiveTransfers).
import type { GatewayClient } from './gateway';
import { sendMedia, TransferError, type MediaFile, type Sent, type SendOptions, type Signal } from './mediasend';
import { sendKept, type Outbox } from './outbox';
import type { MessageKey } from './messages';
import { CommandError, MediaResult, type CommandHandler } from './nodeserve';
import { ActiveTransfers, durationParam, pickRecorderType, record, type Recording } from './recorder';
import { uploadMedia, type UploadCredential, type UploadOptions } from './upload';

/** camera.snap's defaults and bounds. */
export const SNAP_DEFAULTS = { maxWidth: 1600, quality: 0.85, delayMs: 0 } as const;
export const SNAP_MAX_WIDTH = 8192;
export const SNAP_MAX_DELAY_MS = 10_000;
/** How often a transfer cut in the middle is resumed (the same id: only missing blocks go). */
export const SEND_RETRIES = 2;

/** The code of a command refused because the page is not in the foreground. */
export const BACKGROUND = 'NODE_BACKGROUND_UNAVAILABLE';

/** A camera command's failure with the page's own words for it (an i18n key shown on the phone). */
export class CameraError extends CommandError {
  readonly hint: MessageKey;
  constructor(code: string, message: string, hint: MessageKey) {
    super(code, message);
    this.hint = hint;
  }
}

/** camera.snap's params after checks: facing front (the person's side) or back, JPEG quality 0…1. */
export interface SnapParams {
  facing: 'front' | 'back';
  maxWidth: number;
  quality: number;
  delayMs: number;
  transferId: string;
}

/** camera.snap's payload; the file itself is the media transfer. */
export interface SnapPayload {
  width: number;
  height: number;
  size: number;
  sha256: string;
  mime: 'image/jpeg';
  facing: 'front' | 'back';
}

/** The gateway's transfer in a media command's params: {id (32 hex), maxSize (bytes, 0: the store's limit)}. */
export function transferParam(command: string, p: Record<string, unknown>): { id: string; maxSize: number } {
  const t = p.transfer as { id?: unknown; maxSize?: unknown } | undefined;
  if (!t || typeof t.id !== 'string' || !/^[0-9a-f]{32}$/.test(t.id)) {
    throw new CommandError('INVALID_REQUEST', `${command}: no media transfer in the request (an older gateway?)`);
  }
  const maxSize = typeof t.maxSize === 'number' && Number.isFinite(t.maxSize) && t.maxSize > 0 ? t.maxSize : 0;
  return { id: t.id, maxSize };
}

/** A number param from lo to hi, d when absent; INVALID_REQUEST names it otherwise. */
export function numParam(command: string, p: Record<string, unknown>, k: string, d: number, lo: number, hi: number): number {
  const v = p[k];
  if (v === undefined || v === null) return d;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi) throw new CommandError('INVALID_REQUEST', `${command}: ${k} must be a number from ${lo} to ${hi}`);
  return v;
}

function facingParam(command: string, p: Record<string, unknown>): 'front' | 'back' {
  const facing = p.facing ?? 'back';
  if (facing !== 'front' && facing !== 'back') throw new CommandError('INVALID_REQUEST', `${command}: facing must be "front" or "back"`);
  return facing;
}

/** Checks camera.snap's params; INVALID_REQUEST names the first bad one. */
export function snapParams(p: Record<string, unknown>): SnapParams {
  const c = 'camera.snap';
  const facing = facingParam(c, p);
  return {
    facing,
    maxWidth: Math.round(numParam(c, p, 'maxWidth', SNAP_DEFAULTS.maxWidth, 16, SNAP_MAX_WIDTH)),
    quality: numParam(c, p, 'quality', SNAP_DEFAULTS.quality, 0.05, 1),
    delayMs: Math.round(numParam(c, p, 'delayMs', SNAP_DEFAULTS.delayMs, 0, SNAP_MAX_DELAY_MS)),
    transferId: transferParam(c, p).id,
  };
}

/** camera.clip's default length (ms). */
export const CLIP_DEFAULT_MS = 5_000;

/** camera.clip's params after checks. */
export interface ClipParams {
  facing: 'front' | 'back';
  durationMs: number;
  includeAudio: boolean;
  transferId: string;
  maxSize: number;
}

/** Checks camera.clip {facing, durationMs (500…60000, default 5000), includeAudio (default true)} against timeoutMs. */
export function clipParams(p: Record<string, unknown>, timeoutMs: number): ClipParams {
  const c = 'camera.clip';
  const facing = facingParam(c, p);
  if (p.includeAudio !== undefined && typeof p.includeAudio !== 'boolean') throw new CommandError('INVALID_REQUEST', `${c}: includeAudio must be true or false`);
  const t = transferParam(c, p);
  return { facing, durationMs: durationParam(c, p.durationMs, CLIP_DEFAULT_MS, timeoutMs), includeAudio: p.includeAudio !== false, transferId: t.id, maxSize: t.maxSize };
}

/** camera.clip's payload; the file itself is the media transfer. */
export interface ClipPayload {
  durationMs: number;
  /** "video/webm" or "video/mp4"; codecs in mimeType. */
  mime: string;
  mimeType: string;
  size: number;
  sha256: string;
  width: number;
  height: number;
  facing: 'front' | 'back';
  audio: boolean;
}

/** The size a w×h frame is scaled to: at most maxWidth wide, the aspect ratio kept. */
export function scaledSize(w: number, h: number, maxWidth: number): { width: number; height: number } {
  if (w <= maxWidth) return { width: w, height: h };
  return { width: maxWidth, height: Math.max(1, Math.round((h * maxWidth) / w)) };
}

/** What the camera commands use of the browser (tests pass fakes). */
export interface CameraDeps {
  mediaDevices: MediaDevices | undefined;
  document: Pick<Document, 'visibilityState' | 'createElement'>;
  /** Sends a file for a transfer until signal aborts (default: sendMedia signalled through node.media.offer). */
  send: (file: MediaFile, signal?: AbortSignal) => Promise<Sent>;
  /** Takes one frame of stream scaled to maxWidth, as a JPEG or PNG (default: grab). */
  grab?: typeof grab;
  /** Records a stream (default: record). */
  record?: typeof record;
  /** MediaRecorder.isTypeSupported (default the browser's). */
  isTypeSupported?: (type: string) => boolean;
  /** The transfers node.media.cancel can stop (default: a registry of this handler set's own). */
  active?: ActiveTransfers;
  /** Told when a recording starts (the command) and ends (null): the page shows it. */
  onRecording?: (command: string | null) => void;
  /** The node's deviceId and device token, for the HTTPS fallback of a transfer (none: data channel only). */
  credential?: () => UploadCredential | null;
  /** Keeps each file while it is sent, for a resume by the page opened again (none: not kept). */
  outbox?: Outbox;
  /** Told when a file was sent, with the attempts it took (the page shows a resumed send). */
  onSent?: (file: MediaFile, sent: Sent & { attempts: number }) => void;
}

/** Signals a transfer's SDP offer through node.media.offer on the node connection gw. */
export function offerSignal(gw: GatewayClient, transferId: string): Signal {
  return async (sdp) => {
    const r = await gw.request<{ sdp?: string }>('node.media.offer', { transferId, sdp });
    if (typeof r?.sdp !== 'string') throw new TransferError('PROTOCOL', 'node.media.offer answered without an SDP');
    return r.sdp;
  };
}

/** How sendOver sends: the node's credential for the HTTPS fallback, the outbox, and what tests replace. */
export interface SendOverOptions {
  /** The node's deviceId and device token (none: no HTTPS fallback). */
  credential?: () => UploadCredential | null;
  /** Options of the data channel (tests pass a fake RTCPeerConnection). */
  rtc?: Omit<SendOptions, 'signal'>;
  /** Options of the HTTPS upload (tests pass a fake fetch). */
  upload?: Omit<UploadOptions, 'signal'>;
  /** Keeps each file while it is sent, for a resume by the page opened again (outbox.ts; none: not kept). */
  outbox?: Outbox;
  /** Told when a file was sent, with the attempts it took (the page shows a send resumed after a cut). */
  onSent?: (file: MediaFile, sent: Sent & { attempts: number }) => void;
}

/**
 * sendMedia over gw, resumed (same id, only missing blocks) when the connection was cut, at most SEND_RETRIES
 * times; when no data channel can be set up at all, the same transfer goes over the HTTPS upload with the
 * node's credential. The Sent says which path carried the file (transport). The file is kept in o.outbox
 * meanwhile, so that the page opened again after being killed resumes it (outbox.ts).
 */
export function sendOver(gw: GatewayClient, o: SendOverOptions = {}): (file: MediaFile, signal?: AbortSignal) => Promise<Sent> {
  const once = async (file: MediaFile, signal: Signal, opts: SendOptions = {}): Promise<Sent> => {
    try {
      return await sendMedia(file, signal, { ...o.rtc, ...opts });
    } catch (e) {
      const cred = e instanceof TransferError && e.setup ? o.credential?.() : null;
      if (cred) return uploadMedia(file, cred, { ...o.upload, signal: opts.signal });
      throw e;
    }
  };
  return async (file, signal) => {
    const sent = await sendKept(file, offerSignal(gw, file.id), { outbox: o.outbox, retries: SEND_RETRIES, abort: signal, send: once });
    o.onSent?.(file, sent);
    return sent;
  };
}

export function foreground(doc: CameraDeps['document'], command: string): void {
  if (doc.visibilityState !== 'visible') {
    throw new CameraError(BACKGROUND, `${command}: the Atrium page is in the background on this phone; bring it to the front and try again`, 'phone.err.background');
  }
}

/** Maps a getUserMedia failure to a command error. */
export function cameraError(e: unknown): CommandError {
  const name = e instanceof Error || (typeof e === 'object' && e !== null && 'name' in e) ? String((e as { name: unknown }).name) : '';
  const msg = e instanceof Error ? e.message : String(e);
  if (name === 'NotAllowedError' || name === 'SecurityError') {
    return new CameraError('FORBIDDEN', `camera permission denied on this phone: allow the camera for this page in the browser's site settings (${msg || name})`, 'phone.err.cameraDenied');
  }
  if (name === 'NotFoundError' || name === 'OverconstrainedError' || name === 'NotReadableError') {
    return new CameraError('UNAVAILABLE', `no usable camera on this phone (${name}${msg ? ': ' + msg : ''})`, 'phone.err.noCamera');
  }
  return new CommandError('INTERNAL', `camera: ${msg || name || 'failed'}`);
}

/** One frame of stream, scaled to maxWidth, as a JPEG of the given quality. */
export async function grab(
  doc: CameraDeps['document'],
  stream: MediaStream,
  o: { maxWidth: number; quality: number; delayMs: number; deadline: number; mime?: 'image/jpeg' | 'image/png'; command?: string },
): Promise<{ blob: Blob; width: number; height: number }> {
  const c = o.command ?? 'camera.snap';
  const mime = o.mime ?? 'image/jpeg';
  const video = doc.createElement('video');
  video.muted = true;
  video.playsInline = true;
  video.srcObject = stream;
  try {
    await video.play();
    while (video.videoWidth === 0 || video.readyState < 2) {
      if (Date.now() > o.deadline) throw new CommandError('TIMEOUT', `${c}: the capture gave no picture in time`);
      await new Promise((r) => setTimeout(r, 20));
    }
    if (o.delayMs > 0) await new Promise((r) => setTimeout(r, o.delayMs));
    const { width, height } = scaledSize(video.videoWidth, video.videoHeight, o.maxWidth);
    const canvas = doc.createElement('canvas');
    canvas.width = width;
    canvas.height = height;
    const ctx = canvas.getContext('2d');
    if (!ctx) throw new CommandError('INTERNAL', `${c}: no 2D canvas in this browser`);
    ctx.drawImage(video, 0, 0, width, height);
    const blob = await new Promise<Blob | null>((r) => canvas.toBlob(r, mime, o.quality));
    if (!blob || blob.type !== mime) throw new CommandError('INTERNAL', `${c}: the browser could not encode ${mime}`);
    return { blob, width, height };
  } finally {
    video.pause();
    video.srcObject = null;
  }
}

/**
 * Runs a media command's work for transfer id: work gets a signal that node.media.cancel aborts; an
 * abort ends the command with CANCELLED whatever work was doing (capturing, recording, sending).
 */
export async function withTransfer<T>(deps: Pick<CameraDeps, 'active'>, command: string, id: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const active = deps.active ?? new ActiveTransfers();
  const signal = active.begin(id);
  try {
    return await work(signal);
  } catch (e) {
    if (signal.aborted) throw new CommandError('CANCELLED', `${command}: stopped, the gateway cancelled the transfer`);
    throw e;
  } finally {
    active.end(id);
  }
}

/** Sends file for a command; a failed transfer is a CommandError with the transport's code. */
export async function sendFile(deps: Pick<CameraDeps, 'send'>, command: string, file: MediaFile, signal: AbortSignal): Promise<Sent> {
  return deps.send(file, signal).catch((e) => {
    throw e instanceof TransferError ? new CommandError(e.code, `${command}: the file did not reach the gateway: ${e.message}`) : e;
  });
}

function noCamera(): CameraError {
  return new CameraError('UNAVAILABLE', 'this browser gives no camera access here (it needs HTTPS and a camera)', 'phone.err.noCamera');
}

function stopAll(stream: MediaStream): void {
  for (const t of stream.getTracks()) t.stop();
}

/** camera.snap {facing, maxWidth, quality, delayMs} (+ the gateway's transfer) → SnapPayload and the media transfer. */
export function snapHandler(deps: CameraDeps): CommandHandler {
  return async (params, timeoutMs) => {
    foreground(deps.document, 'camera.snap');
    const p = snapParams(params);
    if (!deps.mediaDevices?.getUserMedia) throw noCamera();
    const deadline = Date.now() + Math.max(1000, timeoutMs - 1000);
    return withTransfer(deps, 'camera.snap', p.transferId, async (signal) => {
      let stream: MediaStream;
      try {
        stream = await deps.mediaDevices!.getUserMedia({
          audio: false,
          video: { facingMode: { ideal: p.facing === 'front' ? 'user' : 'environment' }, width: { ideal: p.maxWidth } },
        });
      } catch (e) {
        throw cameraError(e);
      }
      let shot: { blob: Blob; width: number; height: number };
      try {
        // The page may have gone to the background while the person answered the permission prompt.
        foreground(deps.document, 'camera.snap');
        shot = await (deps.grab ?? grab)(deps.document, stream, { ...p, deadline });
      } finally {
        stopAll(stream);
      }
      if (signal.aborted) throw new CommandError('CANCELLED', 'camera.snap: cancelled');
      const data = new Uint8Array(await shot.blob.arrayBuffer());
      const sent = await sendFile(deps, 'camera.snap', { id: p.transferId, name: 'photo.jpg', data, mime: 'image/jpeg', width: shot.width, height: shot.height }, signal);
      const payload: SnapPayload = { width: shot.width, height: shot.height, size: data.length, sha256: sent.sha256, mime: 'image/jpeg', facing: p.facing };
      return new MediaResult(payload, { id: p.transferId, transport: sent.transport ?? 'webrtc' });
    });
  };
}

/**
 * Records stream for a command (recorder.ts) and sends the file: the shared part of camera.clip and
 * screen.record. Tells deps.onRecording while it records.
 */
export async function recordAndSend(
  deps: CameraDeps,
  o: { command: string; stream: MediaStream; durationMs: number; audio: boolean; transferId: string; maxSize: number; name: string; signal: AbortSignal },
): Promise<{ rec: Recording; sent: Sent; width: number; height: number }> {
  const settings = o.stream.getVideoTracks?.()[0]?.getSettings?.() ?? {};
  const isTypeSupported = deps.isTypeSupported ?? globalThis.MediaRecorder?.isTypeSupported?.bind(globalThis.MediaRecorder);
  deps.onRecording?.(o.command);
  let rec: Recording;
  try {
    rec = await (deps.record ?? record)(o.stream, {
      command: o.command,
      durationMs: o.durationMs,
      type: pickRecorderType(isTypeSupported, o.audio),
      maxBytes: o.maxSize,
      signal: o.signal,
    });
  } finally {
    stopAll(o.stream);
    deps.onRecording?.(null);
  }
  const width = settings.width ?? 0;
  const height = settings.height ?? 0;
  const sent = await sendFile(
    deps,
    o.command,
    { id: o.transferId, name: `${o.name}.${rec.ext}`, data: rec.data, mime: rec.mime, width: width || undefined, height: height || undefined, durationMs: rec.durationMs },
    o.signal,
  );
  return { rec, sent, width, height };
}

/** camera.clip {facing, durationMs, includeAudio} (+ the gateway's transfer) → ClipPayload and the media transfer. */
export function clipHandler(deps: CameraDeps): CommandHandler {
  return async (params, timeoutMs) => {
    foreground(deps.document, 'camera.clip');
    const p = clipParams(params, timeoutMs);
    if (!deps.mediaDevices?.getUserMedia) throw noCamera();
    return withTransfer(deps, 'camera.clip', p.transferId, async (signal) => {
      let stream: MediaStream;
      try {
        stream = await deps.mediaDevices!.getUserMedia({ audio: p.includeAudio, video: { facingMode: { ideal: p.facing === 'front' ? 'user' : 'environment' } } });
      } catch (e) {
        throw cameraError(e);
      }
      try {
        foreground(deps.document, 'camera.clip');
      } catch (e) {
        stopAll(stream);
        throw e;
      }
      const audio = p.includeAudio && (stream.getAudioTracks?.().length ?? 0) > 0;
      const { rec, sent, width, height } = await recordAndSend(deps, { command: 'camera.clip', stream, durationMs: p.durationMs, audio, transferId: p.transferId, maxSize: p.maxSize, name: 'clip', signal });
      const payload: ClipPayload = { durationMs: rec.durationMs, mime: rec.mime, mimeType: rec.mimeType, size: rec.data.length, sha256: sent.sha256, width, height, facing: p.facing, audio };
      return new MediaResult(payload, { id: p.transferId, transport: sent.transport ?? 'webrtc' });
    });
  };
}

/** camera.list → {cameras:[{id, label, facing?}]} (labels are empty until the camera was allowed once). */
export function listHandler(deps: Pick<CameraDeps, 'mediaDevices'>): CommandHandler {
  return async () => {
    if (!deps.mediaDevices?.enumerateDevices) throw noCamera();
    const all = await deps.mediaDevices.enumerateDevices();
    const cameras = all
      .filter((d) => d.kind === 'videoinput')
      .map((d) => {
        const caps = typeof (d as InputDeviceInfo).getCapabilities === 'function' ? (d as InputDeviceInfo).getCapabilities() : undefined;
        const fm = caps?.facingMode?.[0];
        const facing = fm === 'user' ? 'front' : fm === 'environment' ? 'back' : undefined;
        return { id: d.deviceId, label: d.label, ...(facing ? { facing } : {}) };
      });
    return { cameras };
  };
}

/** The camera commands served on the node connection gw; node.media.cancel reaches them through deps.active. */
export function cameraHandlers(gw: GatewayClient, deps: Omit<CameraDeps, 'send'> = { mediaDevices: globalThis.navigator?.mediaDevices, document }): Record<string, CommandHandler> {
  const full: CameraDeps = { ...deps, send: sendOver(gw, { credential: deps.credential, outbox: deps.outbox, onSent: deps.onSent }) };
  return { 'camera.list': listHandler(full), 'camera.snap': snapHandler(full), 'camera.clip': clipHandler(full) };
}
