// The phone page's side of a media transfer (issue 22): a file goes to the gateway over a WebRTC data
// channel with the browser's RTCPeerConnection, in the framing of backend/rtc (its package doc is the
// reference; docs/PROTOCOL.md "Media transfers"). Every message is binary, its first byte its type:
//   'O' offer (JSON), 'H' block hashes (uint32 first index + 32-byte SHA-256 digests), 'N' need (JSON
//   ranges, from the gateway), 'B' block (uint32 index + bytes), 'E' end of a round, 'F' final (JSON, from
//   the gateway), 'X' cancel (JSON {code, message}, either way).
// Signalling is non-trickle: the offer is sent once every host candidate is in it, through `signal`
// (node.media.offer on the page's node connection), and the answer comes back the same way.

/** Bytes before a block's data: the type and a uint32 index. */
export const HEADER_LEN = 5;
export const CHANNEL_LABEL = 'atrium-media';
export const FRAMING_VERSION = 1;
/** Smallest block the gateway accepts (backend/media MinBlockSize). */
export const MIN_BLOCK_SIZE = 1024;

/** What is sent: the bytes and what the gateway's sidecar says of them. */
export interface MediaFile {
  /** The transfer id the gateway gave in the node.invoke.request params. */
  id: string;
  name: string;
  data: Uint8Array;
  mime?: string;
  width?: number;
  height?: number;
  durationMs?: number;
}

/** Sends the SDP offer to the gateway (node.media.offer) and returns its SDP answer. */
export type Signal = (offerSdp: string) => Promise<string>;

export interface SendOptions {
  /** Largest block in bytes (default 65536); the gateway's maxMessageSize minus 5 lowers it. */
  blockSize?: number;
  /** bufferedAmountLowThreshold in bytes (default 524288). */
  lowWater?: number;
  /** Most bytes queued on the channel before waiting for bufferedamountlow (default 2097152). */
  highWater?: number;
  /** Gathering, ICE, DTLS and the channel opening, in ms (default 15000). */
  connectTimeoutMs?: number;
  /** Silence of the gateway, in ms (default 30000). */
  idleTimeoutMs?: number;
  /** The RTCPeerConnection constructor (default the browser's). */
  RTCPeerConnection?: typeof RTCPeerConnection;
  /** Ends the send at once (node.media.cancel): the connection is closed, sendMedia rejects CANCELLED. */
  signal?: AbortSignal;
}

/** What one sendMedia did. */
export interface Sent {
  /** Hex SHA-256 of the file, as the gateway confirmed it. */
  sha256: string;
  blockSize: number;
  blocks: number;
  /** Blocks sent on this connection (resends included; fewer than blocks on a resume). */
  blocksSent: number;
  rounds: number;
  /** The path the file took: a WebRTC data channel, or the HTTPS upload fallback (upload.ts). */
  transport?: 'webrtc' | 'https';
}

/**
 * A transfer refused or abandoned; `code` as in backend/rtc (TOO_LARGE, BUSY, TIMEOUT, …). `setup` is true
 * when no data channel could be set up at all (no WebRTC, no address to offer, ICE failed or timed out,
 * the channel never opened): the HTTPS upload (upload.ts) can still carry the file.
 */
export class TransferError extends Error {
  readonly code: string;
  readonly remote: boolean;
  setup = false;
  constructor(code: string, message: string, remote = false) {
    super(message);
    this.name = 'TransferError';
    this.code = code;
    this.remote = remote;
  }
}

function setupFailed(code: string, message: string): TransferError {
  const e = new TransferError(code, message);
  e.setup = true;
  return e;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A message of type t carrying JSON. */
export function jsonMsg(t: string, v: unknown): Uint8Array {
  const body = enc.encode(JSON.stringify(v));
  const m = new Uint8Array(1 + body.length);
  m[0] = t.charCodeAt(0);
  m.set(body, 1);
  return m;
}

/** A message of type t: a uint32 big-endian index, then payload. */
export function indexedMsg(t: string, index: number, payload: Uint8Array): Uint8Array {
  const m = new Uint8Array(HEADER_LEN + payload.length);
  m[0] = t.charCodeAt(0);
  new DataView(m.buffer).setUint32(1, index, false);
  m.set(payload, HEADER_LEN);
  return m;
}

/** The 'H' messages for the digests, at most `per` digests each. */
export function hashMsgs(digests: Uint8Array[], per: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let first = 0; first < digests.length; first += per) {
    const part = digests.slice(first, first + per);
    const payload = new Uint8Array(32 * part.length);
    part.forEach((d, k) => payload.set(d, 32 * k));
    out.push(indexedMsg('H', first, payload));
  }
  return out;
}

/** A message's type and, for the JSON ones, its body. */
export function parseMsg(m: Uint8Array): { type: string; body?: unknown } {
  if (m.length === 0) throw new TransferError('PROTOCOL', 'an empty message');
  const type = String.fromCharCode(m[0]);
  if (type === 'N' || type === 'F' || type === 'X') {
    try {
      return { type, body: JSON.parse(dec.decode(m.subarray(1))) };
    } catch {
      throw new TransferError('PROTOCOL', `a malformed ${type} message`);
    }
  }
  return { type };
}

export function hex(b: ArrayBuffer | Uint8Array): string {
  return Array.from(b instanceof Uint8Array ? b : new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('');
}

/** The block size for a peer whose maxMessageSize is peerMax (0 or unknown: no limit from it). */
export function pickBlockSize(wanted: number, peerMax: number | null | undefined): number {
  let bs = wanted;
  if (peerMax && Number.isFinite(peerMax) && peerMax > 0) bs = Math.min(bs, peerMax - HEADER_LEN);
  return Math.min(bs, 4 << 20);
}

/** Blocks named by need ranges [a, b), checked against the block count. */
export function needed(body: unknown, blocks: number): number[] {
  const ranges = (body as { ranges?: unknown })?.ranges;
  if (!Array.isArray(ranges)) throw new TransferError('PROTOCOL', 'a need without ranges');
  const out: number[] = [];
  for (const r of ranges) {
    if (!Array.isArray(r) || r.length !== 2 || !Number.isInteger(r[0]) || !Number.isInteger(r[1]) || r[0] < 0 || r[1] > blocks || r[0] >= r[1]) {
      throw new TransferError('PROTOCOL', `a need range ${JSON.stringify(r)} of ${blocks} blocks`);
    }
    for (let i = r[0]; i < r[1]; i++) out.push(i);
  }
  return out;
}

async function sha256(b: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', b as Uint8Array<ArrayBuffer>));
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TransferError('TIMEOUT', `${what}: no progress for ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Messages of a data channel as a queue the sender awaits. */
class Inbox {
  private queue: Uint8Array[] = [];
  private waiter: (() => void) | null = null;
  closed = false;
  constructor(dc: RTCDataChannel) {
    dc.binaryType = 'arraybuffer';
    dc.onmessage = (e) => {
      this.queue.push(typeof e.data === 'string' ? new Uint8Array([0]) : new Uint8Array(e.data as ArrayBuffer));
      this.wake();
    };
    dc.addEventListener('close', () => {
      this.closed = true;
      this.wake();
    });
  }
  /** Ends a waiting next() (the connection was closed on this side, which fires no close event). */
  close() {
    this.closed = true;
    this.wake();
  }
  private wake() {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
  async next(idleMs: number): Promise<Uint8Array> {
    const m = this.queue.shift();
    if (m) return m;
    if (this.closed) throw new TransferError('CLOSED', 'the data channel closed');
    await withTimeout(new Promise<void>((resolve) => (this.waiter = resolve)), idleMs, 'waiting for the gateway');
    return this.next(idleMs);
  }
}

/**
 * Sends file to the gateway over a new peer connection and resolves when the gateway confirms it
 * stored the file. Calling it again with the same id after a cut resumes: only missing blocks go.
 * Rejects with TransferError (a refusal, `remote` true; a timeout; a closed channel).
 */
export async function sendMedia(file: MediaFile, signal: Signal, opts: SendOptions = {}): Promise<Sent> {
  const PC = opts.RTCPeerConnection ?? globalThis.RTCPeerConnection;
  if (!PC) throw setupFailed('UNAVAILABLE', 'this browser has no WebRTC');
  const stop = opts.signal;
  if (stop?.aborted) throw cancelled(stop);
  const connectMs = opts.connectTimeoutMs ?? 15000;
  const idleMs = opts.idleTimeoutMs ?? 30000;
  const lowWater = opts.lowWater ?? 512 << 10;
  const highWater = Math.max(opts.highWater ?? 2 << 20, lowWater);
  const pc = new PC({ iceServers: [] });
  let inbox: Inbox | null = null;
  let abort: (e: TransferError) => void = () => undefined;
  const aborted = new Promise<never>((_, reject) => (abort = reject));
  aborted.catch(() => undefined);
  const onAbort = () => {
    pc.close();
    inbox?.close();
    abort(cancelled(stop!));
  };
  stop?.addEventListener('abort', onAbort, { once: true });
  try {
    return await Promise.race([run(), aborted]);
  } finally {
    stop?.removeEventListener('abort', onAbort);
    pc.close();
  }

  async function run(): Promise<Sent> {
    const dc = pc.createDataChannel(CHANNEL_LABEL, { ordered: true });
    const box = new Inbox(dc);
    inbox = box;
    const opened = new Promise<void>((resolve, reject) => {
      dc.onopen = () => resolve();
      dc.addEventListener('close', () => reject(new TransferError('CLOSED', 'the data channel closed before it opened')));
      pc.addEventListener('connectionstatechange', () => {
        if (pc.connectionState === 'failed') reject(new TransferError('CLOSED', 'the connection to the gateway failed (ICE)'));
      });
    });
    opened.catch(() => undefined);
    const gathered = new Promise<void>((resolve) => {
      if (pc.iceGatheringState === 'complete') resolve();
      pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
    });
    try {
      await pc.setLocalDescription(await pc.createOffer());
      await withTimeout(gathered, connectMs, 'gathering candidates');
      const offer = pc.localDescription!.sdp;
      if (!/^a=candidate:/m.test(offer)) throw new TransferError('UNAVAILABLE', 'no network address of this device can carry a data channel');
      const answer = await withTimeout(signal(offer), connectMs, 'signalling');
      await pc.setRemoteDescription({ type: 'answer', sdp: answer });
      await withTimeout(opened, connectMs, 'connecting');
    } catch (e) {
      // The gateway's own refusal of the offer (a gateway error, not a TransferError) is no setup failure.
      if (e instanceof TransferError && !e.remote && !stop?.aborted) e.setup = true;
      throw e;
    }

    const bs = pickBlockSize(opts.blockSize ?? 64 << 10, pc.sctp?.maxMessageSize);
    if (bs < MIN_BLOCK_SIZE) throw new TransferError('INVALID', `the gateway's maxMessageSize ${pc.sctp?.maxMessageSize} is too small`);
    const data = file.data;
    const blocks = Math.ceil(data.length / bs);
    if (blocks === 0) throw new TransferError('INVALID', `empty file ${file.name}`);
    const block = (i: number) => data.subarray(i * bs, Math.min((i + 1) * bs, data.length));
    const digests: Uint8Array[] = [];
    for (let i = 0; i < blocks; i++) digests.push(await sha256(block(i)));
    const sum = hex(await sha256(data));

    dc.bufferedAmountLowThreshold = lowWater;
    const send = async (m: Uint8Array) => {
      // Wait for bufferedamountlow, re-checking the channel every 250 ms: a connection closed on
      // this side (pc.close()) fires no event on its channels.
      const since = Date.now();
      while (dc.bufferedAmount > highWater) {
        if (dc.readyState !== 'open') throw new TransferError('CLOSED', 'the data channel closed');
        if (Date.now() - since > idleMs) throw new TransferError('TIMEOUT', `the gateway took nothing for ${idleMs} ms`);
        const stop = new AbortController();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 250);
          dc.addEventListener('bufferedamountlow', () => (clearTimeout(timer), resolve()), { once: true, signal: stop.signal });
        });
        stop.abort();
      }
      if (dc.readyState !== 'open') throw new TransferError('CLOSED', 'the data channel closed');
      dc.send(m as Uint8Array<ArrayBuffer>);
    };
    const cancel = (code: string, message: string) => {
      if (dc.readyState === 'open') dc.send(jsonMsg('X', { code, message }) as Uint8Array<ArrayBuffer>);
      return new TransferError(code, message);
    };

    await send(
      jsonMsg('O', {
        v: FRAMING_VERSION,
        id: file.id,
        name: file.name,
        size: data.length,
        sha256: sum,
        blockSize: bs,
        blocks,
        mime: file.mime,
        width: file.width,
        height: file.height,
        durationMs: file.durationMs,
      }),
    );
    const peerMax = pc.sctp?.maxMessageSize ?? 0;
    const per = Math.max(1, Math.min(2048, peerMax > 0 ? Math.floor((peerMax - HEADER_LEN) / 32) : 2048));
    for (const m of hashMsgs(digests, per)) await send(m);

    const sent: Sent = { sha256: sum, blockSize: bs, blocks, blocksSent: 0, rounds: 0, transport: 'webrtc' };
    for (;;) {
      const msg = parseMsg(await box.next(idleMs));
      if (msg.type === 'N') {
        sent.rounds++;
        for (const i of needed(msg.body, blocks)) {
          await send(indexedMsg('B', i, block(i)));
          sent.blocksSent++;
        }
        await send(new Uint8Array(['E'.charCodeAt(0)]));
      } else if (msg.type === 'F') {
        const fin = msg.body as { sha256?: string; size?: number };
        if (fin.sha256 !== sum || fin.size !== data.length) {
          throw new TransferError('CHECKSUM', `the gateway stored ${fin.sha256} (${fin.size} bytes), not ${sum}`);
        }
        return sent;
      } else if (msg.type === 'X') {
        const x = msg.body as { code?: string; message?: string };
        throw new TransferError(String(x.code ?? 'CANCELLED'), String(x.message ?? 'refused by the gateway'), true);
      } else {
        throw cancel('PROTOCOL', `unexpected message ${JSON.stringify(msg.type)}`);
      }
    }
  }
}

function cancelled(s: AbortSignal): TransferError {
  const r: unknown = s.reason;
  return new TransferError('CANCELLED', r instanceof Error ? r.message : typeof r === 'string' ? r : 'the send was cancelled');
}
