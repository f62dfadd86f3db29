// The phone page's side of a live view (issue 22 item 3; docs/PROTOCOL.md "Live view", backend/live's
// package doc is the reference). camera.live and screen.live {viewId, fps, maxWidth, facing?,
// timesliceMs, maxChunkBytes}: the page captures, encodes with MediaRecorder (WebM, video only) and
// streams the chunks over one RTCPeerConnection data channel labelled "atrium-live", signalled with
// node.live.offer. Every message is binary, its first byte its type:
//   'C' chunk (page → gateway): uint32 seq, float64 capture time (Unix ms), WebM bytes
//   'P' ping (gateway → page): JSON {t};  'Q' pong (page → gateway): JSON {t, n: the page's Unix ms}
//   'X' stop (either way): JSON {reason, by?}
// The page shows that it is being watched (onWatched) with a Stop button until the view ends.
import type { GatewayClient } from './gateway';
import { CommandError, type CommandHandler } from './nodeserve';
import { CameraError, cameraError, foreground, numParam, scaledSize } from './camera';
import { pickRecorderType } from './recorder';

export const LIVE_LABEL = 'atrium-live';
export const LIVE_CAMERA = 'camera.live';
export const LIVE_SCREEN = 'screen.live';
/** Bytes of a chunk message before its data: type, uint32 seq, float64 capture time. */
export const CHUNK_HEADER = 13;
/** The encoder's bit rate (bits/s): about 30 KB per 250 ms chunk. */
export const LIVE_BITRATE = 1_000_000;
/** A keyframe every this many ms, where the browser takes videoKeyFrameIntervalDuration (a saved clip starts on one). */
export const KEYFRAME_INTERVAL_MS = 1000;
/** Bytes queued on the channel above which the view ends: the network cannot carry the stream. */
export const MAX_BUFFERED = 4 << 20;
/** Gathering, ICE, DTLS and the channel opening (ms). */
export const CONNECT_TIMEOUT_MS = 15_000;

export type LiveSource = 'camera' | 'screen';

/** What the page shows while it is watched. */
export interface LiveWatch {
  viewId: string;
  source: LiveSource;
  /** Ends the view from the page (the person's Stop): the gateway is told, the viewer gets live.ended. */
  stop: () => void;
}

export interface LiveDeps {
  mediaDevices: MediaDevices | undefined;
  document: Pick<Document, 'visibilityState'>;
  /** node.live.offer {viewId, sdp} → the gateway's SDP answer. */
  signal: (viewId: string, sdp: string) => Promise<string>;
  /** Told when a view starts (the banner) and ends (null). */
  onWatched: (w: LiveWatch | null) => void;
  isTypeSupported?: (type: string) => boolean;
  RTCPeerConnection?: typeof RTCPeerConnection;
  MediaRecorder?: typeof MediaRecorder;
  /** The clock of capture stamps and pongs (default Date.now). */
  now?: () => number;
}

export interface LiveParams {
  viewId: string;
  fps: number;
  maxWidth: number;
  facing: 'front' | 'back';
  timesliceMs: number;
  maxChunkBytes: number;
}

export function liveParams(command: string, p: Record<string, unknown>): LiveParams {
  const viewId = typeof p.viewId === 'string' && /^[0-9a-f]{32}$/.test(p.viewId) ? p.viewId : '';
  if (!viewId) throw new CommandError('INVALID_REQUEST', `${command}: viewId (32 hex characters) is required`);
  if (p.facing !== undefined && p.facing !== 'front' && p.facing !== 'back') throw new CommandError('INVALID_REQUEST', `${command}: facing must be front or back`);
  return {
    viewId,
    fps: numParam(command, p, 'fps', 15, 1, 30),
    maxWidth: numParam(command, p, 'maxWidth', 640, 160, 1920),
    facing: p.facing === 'back' ? 'back' : 'front',
    timesliceMs: numParam(command, p, 'timesliceMs', 250, 100, 2000),
    maxChunkBytes: numParam(command, p, 'maxChunkBytes', 256 * 1024, 16 * 1024, 256 * 1024),
  };
}

/** The 'C' messages of one chunk: parts of at most maxChunkBytes, each with its own seq and the chunk's capture time. */
export function chunkMsgs(data: Uint8Array, firstSeq: number, capturedMs: number, maxChunkBytes: number): Uint8Array<ArrayBuffer>[] {
  const out: Uint8Array<ArrayBuffer>[] = [];
  for (let off = 0, seq = firstSeq; off < data.length; off += maxChunkBytes, seq++) {
    const part = data.subarray(off, Math.min(off + maxChunkBytes, data.length));
    const m = new Uint8Array(CHUNK_HEADER + part.length);
    const v = new DataView(m.buffer);
    m[0] = 'C'.charCodeAt(0);
    v.setUint32(1, seq >>> 0, false);
    v.setFloat64(5, capturedMs, false);
    m.set(part, CHUNK_HEADER);
    out.push(m);
  }
  return out;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

export function liveJson(t: 'Q' | 'X', v: unknown): Uint8Array<ArrayBuffer> {
  const b = enc.encode(JSON.stringify(v));
  const m = new Uint8Array(1 + b.length);
  m[0] = t.charCodeAt(0);
  m.set(b, 1);
  return m;
}

/** The answer to a gateway message: a pong for a ping, 'stop' for 'X', null for anything else (ignored). */
export function answerMsg(m: Uint8Array, now: number): Uint8Array<ArrayBuffer> | 'stop' | null {
  if (m.length === 0) return null;
  const type = String.fromCharCode(m[0]);
  if (type === 'X') return 'stop';
  if (type !== 'P') return null;
  try {
    const p = JSON.parse(dec.decode(m.subarray(1))) as { t?: unknown };
    return typeof p.t === 'number' ? liveJson('Q', { t: p.t, n: now }) : null;
  } catch {
    return null;
  }
}

function timeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new CommandError('TIMEOUT', `${what} took over ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** camera.live / screen.live: starts streaming and answers {mimeType, width, height} once the channel is open. */
export function liveHandler(source: LiveSource, deps: LiveDeps): CommandHandler {
  const command = source === 'camera' ? LIVE_CAMERA : LIVE_SCREEN;
  return async (params) => {
    foreground(deps.document as Parameters<typeof foreground>[0], command);
    const p = liveParams(command, params);
    const type = pickRecorderType(deps.isTypeSupported ?? globalThis.MediaRecorder?.isTypeSupported?.bind(globalThis.MediaRecorder), false);
    if (!type || !type.startsWith('video/webm')) {
      throw new CameraError('UNAVAILABLE', `${command}: this browser cannot record WebM, which the live view streams`, 'phone.err.noRecorder');
    }
    const md = deps.mediaDevices;
    let stream: MediaStream;
    try {
      if (source === 'camera') {
        if (!md?.getUserMedia) throw new CameraError('UNAVAILABLE', 'this browser gives no camera access here (it needs HTTPS and a camera)', 'phone.err.noCamera');
        stream = await md.getUserMedia({
          video: { facingMode: p.facing === 'back' ? 'environment' : 'user', width: { ideal: p.maxWidth }, frameRate: { ideal: p.fps } },
          audio: false,
        });
      } else {
        if (!md?.getDisplayMedia) throw new CameraError('SCREEN_CAPTURE_UNAVAILABLE', 'this browser cannot capture the screen (mobile browsers cannot)', 'phone.err.noScreen');
        stream = await md.getDisplayMedia({ video: { frameRate: { ideal: p.fps }, width: { ideal: p.maxWidth } }, audio: false });
      }
    } catch (e) {
      if (e instanceof CommandError) throw e;
      throw cameraError(e);
    }
    const track = stream.getVideoTracks()[0];
    const settings = track?.getSettings?.() ?? {};
    const size = scaledSize(settings.width ?? p.maxWidth, settings.height ?? Math.round((p.maxWidth * 3) / 4), p.maxWidth);
    const PC = deps.RTCPeerConnection ?? globalThis.RTCPeerConnection;
    const Rec = deps.MediaRecorder ?? globalThis.MediaRecorder;
    const now = deps.now ?? Date.now;
    const pc = new PC({ iceServers: [] });
    let over = false;
    let recorder: MediaRecorder | null = null;
    let poll: ReturnType<typeof setInterval> | undefined;
    const dc = pc.createDataChannel(LIVE_LABEL, { ordered: true });
    dc.binaryType = 'arraybuffer';
    const finish = (tell?: string) => {
      if (over) return;
      over = true;
      clearInterval(poll);
      if (tell && dc.readyState === 'open') {
        try {
          dc.send(liveJson('X', { reason: tell }));
        } catch {
          /* closing anyway */
        }
      }
      try {
        if (recorder && recorder.state !== 'inactive') recorder.stop();
      } catch {
        /* already stopped */
      }
      for (const t of stream.getTracks()) t.stop();
      // Let the 'X' leave before the connection closes.
      setTimeout(() => pc.close(), tell ? 300 : 0);
      deps.onWatched(null);
    };
    try {
      const opened = new Promise<void>((resolve, reject) => {
        dc.onopen = () => resolve();
        dc.onclose = () => reject(new CommandError('UNAVAILABLE', `${command}: the live channel closed before it opened`));
      });
      await pc.setLocalDescription(await pc.createOffer());
      await timeout(
        new Promise<void>((resolve) => {
          if (pc.iceGatheringState === 'complete') resolve();
          pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
        }),
        CONNECT_TIMEOUT_MS,
        `${command}: gathering candidates`,
      );
      const answer = await deps.signal(p.viewId, pc.localDescription?.sdp ?? '');
      await pc.setRemoteDescription({ type: 'answer', sdp: answer });
      await timeout(opened, CONNECT_TIMEOUT_MS, `${command}: opening the live channel`);
    } catch (e) {
      finish();
      if (e instanceof CommandError) throw e;
      throw new CommandError('UNAVAILABLE', `${command}: ${e instanceof Error ? e.message : String(e)}`);
    }
    dc.onclose = () => finish();
    dc.onmessage = (ev) => {
      const a = answerMsg(new Uint8Array(ev.data as ArrayBuffer), now());
      if (a === 'stop') finish();
      else if (a && dc.readyState === 'open') dc.send(a);
    };
    pc.onconnectionstatechange = () => (pc.connectionState === 'failed' || pc.connectionState === 'closed') && finish();
    // Chromium fires no close on a channel whose connection it closed itself: look now and then.
    poll = setInterval(() => dc.readyState !== 'open' && finish(), 1000);
    if (track) track.onended = () => finish('stopped'); // the person ended the capture (the browser's own Stop)

    let seq = 0;
    let chain = Promise.resolve();
    const opts: MediaRecorderOptions & { videoKeyFrameIntervalDuration?: number } = {
      mimeType: type,
      videoBitsPerSecond: LIVE_BITRATE,
      videoKeyFrameIntervalDuration: KEYFRAME_INTERVAL_MS,
    };
    recorder = new Rec(stream, opts);
    recorder.ondataavailable = (e: BlobEvent) => {
      if (over || !e.data || e.data.size === 0) return;
      const at = now();
      chain = chain.then(async () => {
        const data = new Uint8Array(await e.data.arrayBuffer());
        if (over) return;
        if (dc.bufferedAmount > MAX_BUFFERED) {
          finish('node_slow');
          return;
        }
        for (const m of chunkMsgs(data, seq, at, p.maxChunkBytes)) {
          dc.send(m);
          seq++;
        }
      });
    };
    recorder.onerror = () => finish('stopped');
    recorder.start(p.timesliceMs);
    deps.onWatched({ viewId: p.viewId, source, stop: () => finish('stopped') });
    return { mimeType: type, width: size.width, height: size.height };
  };
}

/** The live commands served on node connection gw (screen.live only where the browser can capture the screen). */
export function liveHandlers(gw: GatewayClient, deps: Omit<LiveDeps, 'signal'>, screen: boolean): Record<string, CommandHandler> {
  const full: LiveDeps = {
    ...deps,
    signal: async (viewId, sdp) => {
      const r = await gw.request<{ sdp?: string }>('node.live.offer', { viewId, sdp });
      if (typeof r?.sdp !== 'string') throw new CommandError('UNAVAILABLE', 'node.live.offer answered without an SDP');
      return r.sdp;
    },
  };
  const out: Record<string, CommandHandler> = { [LIVE_CAMERA]: liveHandler('camera', full) };
  if (screen) out[LIVE_SCREEN] = liveHandler('screen', full);
  return out;
}
