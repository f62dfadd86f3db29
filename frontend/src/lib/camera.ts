// The phone page's camera as a node (issue 22): camera.list and camera.snap. A photo is taken with
// getUserMedia, drawn on a canvas scaled to maxWidth and encoded by canvas.toBlob('image/jpeg'), then
// sent to the gateway over a WebRTC data channel (mediasend.ts) for the transfer the gateway named in
// the request's params (transfer:{id, maxSize}); the result names the transfer (docs/PROTOCOL.md
// "Media transfers"). A page in the background cannot use the camera (browsers pause or refuse it):
// it answers NODE_BACKGROUND_UNAVAILABLE at once instead of waiting for the person to come back.
import type { GatewayClient } from './gateway';
import { sendMedia, TransferError, type MediaFile, type Sent, type Signal } from './mediasend';
import type { MessageKey } from './messages';
import { CommandError, MediaResult, type CommandHandler } from './nodeserve';

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

/** Checks camera.snap's params; INVALID_REQUEST names the first bad one. */
export function snapParams(p: Record<string, unknown>): SnapParams {
  const bad = (m: string) => new CommandError('INVALID_REQUEST', `camera.snap: ${m}`);
  const num = (k: string, d: number, lo: number, hi: number) => {
    const v = p[k];
    if (v === undefined || v === null) return d;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi) throw bad(`${k} must be a number from ${lo} to ${hi}`);
    return v;
  };
  const facing = p.facing ?? 'back';
  if (facing !== 'front' && facing !== 'back') throw bad('facing must be "front" or "back"');
  const t = p.transfer as { id?: unknown } | undefined;
  if (!t || typeof t.id !== 'string' || !/^[0-9a-f]{32}$/.test(t.id)) throw bad('no media transfer in the request (an older gateway?)');
  return {
    facing,
    maxWidth: Math.round(num('maxWidth', SNAP_DEFAULTS.maxWidth, 16, SNAP_MAX_WIDTH)),
    quality: num('quality', SNAP_DEFAULTS.quality, 0.05, 1),
    delayMs: Math.round(num('delayMs', SNAP_DEFAULTS.delayMs, 0, SNAP_MAX_DELAY_MS)),
    transferId: t.id,
  };
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
  /** Sends a photo for a transfer (default: sendMedia signalled through node.media.offer). */
  send: (file: MediaFile) => Promise<Sent>;
  /** Takes one frame of stream scaled to maxWidth, as a JPEG (default: grab). */
  grab?: typeof grab;
}

/** Signals a transfer's SDP offer through node.media.offer on the node connection gw. */
export function offerSignal(gw: GatewayClient, transferId: string): Signal {
  return async (sdp) => {
    const r = await gw.request<{ sdp?: string }>('node.media.offer', { transferId, sdp });
    if (typeof r?.sdp !== 'string') throw new TransferError('PROTOCOL', 'node.media.offer answered without an SDP');
    return r.sdp;
  };
}

/** sendMedia over gw, resumed (same id, only missing blocks) when the connection was cut. */
export function sendOver(gw: GatewayClient): (file: MediaFile) => Promise<Sent> {
  return async (file) => {
    for (let i = 0; ; i++) {
      try {
        return await sendMedia(file, offerSignal(gw, file.id));
      } catch (e) {
        if (!(e instanceof TransferError) || e.code !== 'CLOSED' || i >= SEND_RETRIES) throw e;
      }
    }
  };
}

function foreground(doc: CameraDeps['document'], command: string): void {
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
  o: { maxWidth: number; quality: number; delayMs: number; deadline: number },
): Promise<{ blob: Blob; width: number; height: number }> {
  const video = doc.createElement('video');
  video.muted = true;
  video.playsInline = true;
  video.srcObject = stream;
  try {
    await video.play();
    while (video.videoWidth === 0 || video.readyState < 2) {
      if (Date.now() > o.deadline) throw new CommandError('TIMEOUT', 'camera.snap: the camera gave no picture in time');
      await new Promise((r) => setTimeout(r, 20));
    }
    if (o.delayMs > 0) await new Promise((r) => setTimeout(r, o.delayMs));
    const { width, height } = scaledSize(video.videoWidth, video.videoHeight, o.maxWidth);
    const canvas = doc.createElement('canvas');
    canvas.width = width;
    canvas.height = height;
    const ctx = canvas.getContext('2d');
    if (!ctx) throw new CommandError('INTERNAL', 'camera.snap: no 2D canvas in this browser');
    ctx.drawImage(video, 0, 0, width, height);
    const blob = await new Promise<Blob | null>((r) => canvas.toBlob(r, 'image/jpeg', o.quality));
    if (!blob) throw new CommandError('INTERNAL', 'camera.snap: the browser could not encode the JPEG');
    return { blob, width, height };
  } finally {
    video.pause();
    video.srcObject = null;
  }
}

/** camera.snap {facing, maxWidth, quality, delayMs} (+ the gateway's transfer) → SnapPayload and the media transfer. */
export function snapHandler(deps: CameraDeps): CommandHandler {
  return async (params, timeoutMs) => {
    foreground(deps.document, 'camera.snap');
    const p = snapParams(params);
    if (!deps.mediaDevices?.getUserMedia) {
      throw new CameraError('UNAVAILABLE', 'this browser gives no camera access here (it needs HTTPS and a camera)', 'phone.err.noCamera');
    }
    const deadline = Date.now() + Math.max(1000, timeoutMs - 1000);
    let stream: MediaStream;
    try {
      stream = await deps.mediaDevices.getUserMedia({
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
      for (const t of stream.getTracks()) t.stop();
    }
    const data = new Uint8Array(await shot.blob.arrayBuffer());
    const sent = await deps.send({ id: p.transferId, name: 'photo.jpg', data, mime: 'image/jpeg', width: shot.width, height: shot.height }).catch((e) => {
      throw e instanceof TransferError ? new CommandError(e.code, `camera.snap: the photo did not reach the gateway: ${e.message}`) : e;
    });
    const payload: SnapPayload = { width: shot.width, height: shot.height, size: data.length, sha256: sent.sha256, mime: 'image/jpeg', facing: p.facing };
    return new MediaResult(payload, { id: p.transferId, transport: 'webrtc' });
  };
}

/** camera.list → {cameras:[{id, label, facing?}]} (labels are empty until the camera was allowed once). */
export function listHandler(deps: Pick<CameraDeps, 'mediaDevices'>): CommandHandler {
  return async () => {
    if (!deps.mediaDevices?.enumerateDevices) {
      throw new CameraError('UNAVAILABLE', 'this browser gives no camera access here (it needs HTTPS and a camera)', 'phone.err.noCamera');
    }
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

/** The camera commands served on the node connection gw. */
export function cameraHandlers(gw: GatewayClient, deps: Omit<CameraDeps, 'send'> = { mediaDevices: globalThis.navigator?.mediaDevices, document }): Record<string, CommandHandler> {
  const full: CameraDeps = { ...deps, send: sendOver(gw) };
  return { 'camera.list': listHandler(full), 'camera.snap': snapHandler(full) };
}
