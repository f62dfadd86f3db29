// The page's screen as a node (issue 22): screen.snapshot and screen.record through the browser's
// screen capture (getDisplayMedia). The commands are declared only where the browser has it
// (screenCaptureAvailable): desktop Chromium, Firefox and Safari do; mobile browsers (Chrome for
// Android, Safari on iOS) do not, so a phone never offers them and the gateway refuses them for it
// (FORBIDDEN "may not run", listing what it can run). Where the browser has the API but cannot
// capture (no display, a browser that wants a tap first), the command answers
// SCREEN_CAPTURE_UNAVAILABLE and the page says why. The browser asks its person which screen or
// window to share on every capture: that is the consent.
import type { GatewayClient } from './gateway';
import { CameraError, foreground, grab, numParam, recordAndSend, sendFile, sendOver, transferParam, withTransfer, type CameraDeps } from './camera';
import { CommandError, MediaResult, type CommandHandler } from './nodeserve';
import { durationParam } from './recorder';

/** The code of a screen command where the browser cannot capture the screen. */
export const SCREEN_UNAVAILABLE = 'SCREEN_CAPTURE_UNAVAILABLE';
export const SCREEN_COMMANDS = ['screen.record', 'screen.snapshot'] as const;
/** screen.snapshot's and screen.record's defaults. */
export const SCREEN_DEFAULTS = { format: 'png', maxWidth: 3840, quality: 0.9, durationMs: 10_000, fps: 10 } as const;
export const SCREEN_MAX_FPS = 30;

/** Whether this browser offers screen capture (getDisplayMedia); mobile browsers do not. */
export function screenCaptureAvailable(mediaDevices: MediaDevices | undefined): boolean {
  return typeof mediaDevices?.getDisplayMedia === 'function';
}

function unavailable(command: string, why: string): CameraError {
  return new CameraError(SCREEN_UNAVAILABLE, `${command}: ${why}`, 'phone.err.noScreen');
}

/** Maps a getDisplayMedia failure to a command error. */
export function screenError(command: string, e: unknown): CommandError {
  const name = typeof e === 'object' && e !== null && 'name' in e ? String((e as { name: unknown }).name) : '';
  const msg = e instanceof Error ? e.message : String(e);
  if (name === 'NotAllowedError' || name === 'SecurityError') {
    return new CameraError('FORBIDDEN', `${command}: screen sharing was not allowed on this device (the person declined, or the browser's settings block it: ${msg || name})`, 'phone.err.screenDenied');
  }
  if (name === 'InvalidStateError') return unavailable(command, `this browser shares the screen only right after a click on the page (${msg || name})`);
  if (name === 'NotFoundError' || name === 'NotReadableError' || name === 'NotSupportedError' || name === 'AbortError') {
    return unavailable(command, `this browser could not capture a screen here (${name}${msg ? ': ' + msg : ''})`);
  }
  return new CommandError('INTERNAL', `${command}: ${msg || name || 'failed'}`);
}

/** screen.snapshot's params after checks. */
export interface ScreenSnapParams {
  format: 'png' | 'jpeg';
  maxWidth: number;
  quality: number;
  transferId: string;
}

/** Checks screen.snapshot {format?: "png"|"jpeg" (default png), maxWidth? (16…8192, default 3840), quality? (JPEG, 0.05…1, default 0.9)}. */
export function screenSnapParams(p: Record<string, unknown>): ScreenSnapParams {
  const c = 'screen.snapshot';
  const format = p.format ?? SCREEN_DEFAULTS.format;
  if (format !== 'png' && format !== 'jpeg') throw new CommandError('INVALID_REQUEST', `${c}: format must be "png" or "jpeg"`);
  return {
    format,
    maxWidth: Math.round(numParam(c, p, 'maxWidth', SCREEN_DEFAULTS.maxWidth, 16, 8192)),
    quality: numParam(c, p, 'quality', SCREEN_DEFAULTS.quality, 0.05, 1),
    transferId: transferParam(c, p).id,
  };
}

/** screen.record's params after checks. */
export interface ScreenRecordParams {
  durationMs: number;
  fps: number;
  transferId: string;
  maxSize: number;
}

/** Checks screen.record {durationMs? (500…60000, default 10000), fps? (1…30, default 10)} against timeoutMs. */
export function screenRecordParams(p: Record<string, unknown>, timeoutMs: number): ScreenRecordParams {
  const c = 'screen.record';
  const t = transferParam(c, p);
  return {
    durationMs: durationParam(c, p.durationMs, SCREEN_DEFAULTS.durationMs, timeoutMs),
    fps: Math.round(numParam(c, p, 'fps', SCREEN_DEFAULTS.fps, 1, SCREEN_MAX_FPS)),
    transferId: t.id,
    maxSize: t.maxSize,
  };
}

async function capture(deps: CameraDeps, command: string, video: MediaTrackConstraints | true): Promise<MediaStream> {
  foreground(deps.document, command);
  if (!screenCaptureAvailable(deps.mediaDevices)) throw unavailable(command, 'this browser cannot capture the screen (mobile browsers cannot)');
  try {
    return await deps.mediaDevices!.getDisplayMedia({ video, audio: false });
  } catch (e) {
    throw screenError(command, e);
  }
}

/** screen.snapshot (+ the gateway's transfer) → {width, height, size, sha256, mime} and the media transfer. */
export function screenSnapshotHandler(deps: CameraDeps): CommandHandler {
  return async (params, timeoutMs) => {
    const c = 'screen.snapshot';
    const p = screenSnapParams(params);
    const deadline = Date.now() + Math.max(1000, timeoutMs - 1000);
    return withTransfer(deps, c, p.transferId, async (signal) => {
      const stream = await capture(deps, c, true);
      const mime = p.format === 'png' ? 'image/png' : 'image/jpeg';
      let shot: { blob: Blob; width: number; height: number };
      try {
        shot = await (deps.grab ?? grab)(deps.document, stream, { maxWidth: p.maxWidth, quality: p.quality, delayMs: 0, deadline, mime, command: c });
      } finally {
        for (const tr of stream.getTracks()) tr.stop();
      }
      if (signal.aborted) throw new CommandError('CANCELLED', `${c}: cancelled`);
      const data = new Uint8Array(await shot.blob.arrayBuffer());
      const sent = await sendFile(deps, c, { id: p.transferId, name: `screen.${p.format === 'png' ? 'png' : 'jpg'}`, data, mime, width: shot.width, height: shot.height }, signal);
      return new MediaResult({ width: shot.width, height: shot.height, size: data.length, sha256: sent.sha256, mime }, { id: p.transferId, transport: sent.transport ?? 'webrtc' });
    });
  };
}

/** screen.record {durationMs, fps} (+ the gateway's transfer) → {durationMs, mime, mimeType, size, sha256, width, height, fps} and the media transfer. */
export function screenRecordHandler(deps: CameraDeps): CommandHandler {
  return async (params, timeoutMs) => {
    const c = 'screen.record';
    const p = screenRecordParams(params, timeoutMs);
    return withTransfer(deps, c, p.transferId, async (signal) => {
      const stream = await capture(deps, c, { frameRate: { ideal: p.fps, max: p.fps } });
      const { rec, sent, width, height } = await recordAndSend(deps, { command: c, stream, durationMs: p.durationMs, audio: false, transferId: p.transferId, maxSize: p.maxSize, name: 'screen', signal });
      return new MediaResult(
        { durationMs: rec.durationMs, mime: rec.mime, mimeType: rec.mimeType, size: rec.data.length, sha256: sent.sha256, width, height, fps: p.fps },
        { id: p.transferId, transport: sent.transport ?? 'webrtc' },
      );
    });
  };
}

/** The screen commands served on gw, none where the browser cannot capture the screen. */
export function screenHandlers(gw: GatewayClient, deps: Omit<CameraDeps, 'send'>): Record<string, CommandHandler> {
  if (!screenCaptureAvailable(deps.mediaDevices)) return {};
  const full: CameraDeps = { ...deps, send: sendOver(gw, { credential: deps.credential, outbox: deps.outbox, onSent: deps.onSent }) };
  return { 'screen.snapshot': screenSnapshotHandler(full), 'screen.record': screenRecordHandler(full) };
}
