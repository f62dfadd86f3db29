// The phone page's HTTPS fallback of a media transfer (issue 22): when no WebRTC data channel can be
// set up (mediasend.ts), the file goes to the gateway in blocks over the page's own origin, with the
// node's device token, for the same transfer (backend/upload's package doc is the reference;
// docs/PROTOCOL.md "Media transfers"):
//   POST   /media/upload/{id}      the plan {v, name, size, sha256, blockSize, blocks: hex SHA-256 each, mime, …}
//   GET    /media/upload/{id}      the blocks still missing (after a cut)
//   PUT    /media/upload/{id}/{i}  block i, X-Atrium-Block-SHA256: its hex SHA-256
//   DELETE /media/upload/{id}      cancel (nothing of the file stays on the gateway)
// Every request: Authorization: Bearer <node token>, X-Atrium-Device: <deviceId>.
import { hex, TransferError, type MediaFile, type Sent } from './mediasend';

/** The node's credential for the upload route. */
export interface UploadCredential {
  deviceId: string;
  token: string;
}

export interface UploadOptions {
  /** Block size in bytes (default 1 MiB; more when the file would need over 4096 blocks; at most 4 MiB). */
  blockSize?: number;
  /** The gateway's origin (default the page's: location.origin). */
  base?: string;
  /** fetch (default the browser's). */
  fetch?: typeof fetch;
  /** How often a cut request is resumed (default 3). */
  retries?: number;
  /** Ends the upload at once: the gateway is told (DELETE), uploadMedia rejects CANCELLED. */
  signal?: AbortSignal;
}

/** The gateway's answer to every upload request that succeeded. */
interface Status {
  blocks: number;
  blockSize: number;
  missing: [number, number][];
  stored: boolean;
  media?: { id: string; size: number; sha256: string; transport: string };
}

export const UPLOAD_BLOCK = 1 << 20;
export const UPLOAD_MAX_BLOCK = 4 << 20;
export const UPLOAD_MAX_BLOCKS = 4096;

/** The block size for a file of size bytes: wanted, raised so that it needs at most 4096 blocks. */
export function uploadBlockSize(size: number, wanted = UPLOAD_BLOCK): number {
  return Math.min(UPLOAD_MAX_BLOCK, Math.max(1024, wanted, Math.ceil(size / UPLOAD_MAX_BLOCKS)));
}

async function sha256(b: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', b as Uint8Array<ArrayBuffer>));
}

/** A refusal's code from the gateway's JSON answer {code, message}, else from its status. */
async function refusal(r: Response, what: string): Promise<TransferError> {
  let body: { code?: string; message?: string } = {};
  try {
    body = await r.json();
  } catch {
    /* not JSON */
  }
  const byStatus: Record<number, string> = { 401: 'UNAUTHORIZED', 403: 'FORBIDDEN', 404: 'FORBIDDEN', 409: 'BUSY', 410: 'CANCELLED', 413: 'TOO_LARGE', 507: 'DISK_FULL' };
  return new TransferError(body.code || byStatus[r.status] || 'UNAVAILABLE', `${what}: HTTP ${r.status} ${body.message ?? ''}`.trim(), true);
}

/**
 * Uploads file to the gateway in blocks and resolves once the gateway stored it (its SHA-256 checked).
 * A request cut on the way (a network error) is resumed: the gateway says which blocks it lacks and only
 * those go again. Rejects with TransferError (a refusal, `remote` true; CANCELLED on signal).
 */
export async function uploadMedia(file: MediaFile, cred: UploadCredential, opts: UploadOptions = {}): Promise<Sent> {
  const f = opts.fetch ?? globalThis.fetch.bind(globalThis);
  const base = opts.base ?? globalThis.location?.origin ?? '';
  const url = `${base}/media/upload/${file.id}`;
  const stop = opts.signal;
  const retries = opts.retries ?? 3;
  const auth = { Authorization: `Bearer ${cred.token}`, 'X-Atrium-Device': cred.deviceId };
  const data = file.data;
  if (data.length === 0) throw new TransferError('INVALID', `empty file ${file.name}`);
  const bs = uploadBlockSize(data.length, opts.blockSize);
  const count = Math.ceil(data.length / bs);
  const block = (i: number) => data.subarray(i * bs, Math.min((i + 1) * bs, data.length));
  const digests: string[] = [];
  for (let i = 0; i < count; i++) digests.push(hex(await sha256(block(i))));
  const sum = hex(await sha256(data));
  const plan = { v: 1, name: file.name, size: data.length, sha256: sum, blockSize: bs, blocks: digests, mime: file.mime, width: file.width, height: file.height, durationMs: file.durationMs };
  const sent: Sent & { transport: 'https' } = { sha256: sum, blockSize: bs, blocks: count, blocksSent: 0, rounds: 0, transport: 'https' };

  const call = async (method: string, path: string, body?: BodyInit, headers: Record<string, string> = {}): Promise<Status> => {
    if (stop?.aborted) throw cancelledErr();
    const r = await f(url + path, { method, body, headers: { ...auth, ...headers }, signal: stop, credentials: 'omit', cache: 'no-store' });
    if (!r.ok) throw await refusal(r, `${method} ${file.id}${path}`);
    return (await r.json()) as Status;
  };
  const cancelledErr = () => new TransferError('CANCELLED', 'the upload was cancelled');
  const onAbort = () => {
    // Tell the gateway; the send itself is ended by fetch's signal.
    void f(url, { method: 'DELETE', headers: auth, credentials: 'omit' }).catch(() => undefined);
  };
  stop?.addEventListener('abort', onAbort, { once: true });
  try {
    let st: Status | null = null;
    for (let cuts = 0; ; ) {
      try {
        // The plan first, and again after a cut: it resumes, the answer names what is missing.
        if (!st) st = await call('POST', '', JSON.stringify(plan), { 'Content-Type': 'application/json' });
        sent.rounds++;
        for (const [a, b] of st.missing) {
          for (let i = a; i < b; i++) {
            st = await call('PUT', `/${i}`, block(i) as Uint8Array<ArrayBuffer>, { 'X-Atrium-Block-SHA256': digests[i], 'Content-Type': 'application/octet-stream' });
            sent.blocksSent++;
          }
        }
        if (st.stored) break;
        st = await call('GET', '');
        if (st.missing.length === 0 && !st.stored) throw new TransferError('PROTOCOL', 'the gateway lacks no block but stored nothing');
      } catch (e) {
        if (stop?.aborted) throw cancelledErr();
        if (e instanceof TransferError) throw e;
        if (cuts >= retries) throw new TransferError('CLOSED', `the upload was cut: ${e instanceof Error ? e.message : String(e)}`);
        cuts++;
        st = null;
      }
    }
    if (st.media?.sha256 !== sum || st.media?.size !== data.length) {
      throw new TransferError('CHECKSUM', `the gateway stored ${st.media?.sha256} (${st.media?.size} bytes), not ${sum}`);
    }
    return sent;
  } catch (e) {
    if (stop?.aborted) throw cancelledErr();
    throw e;
  } finally {
    stop?.removeEventListener('abort', onAbort);
  }
}
