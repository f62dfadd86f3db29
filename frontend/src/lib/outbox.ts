// The phone page's outbox of media sends (issue 22): a file is kept in IndexedDB, keyed by its transfer id,
// from just before its send starts until the send ends (stored, refused or given up), so that a page killed or
// reloaded in the middle of a transfer sends it again when it is opened: the gateway keeps the invoke waiting
// for the transfer (docs/PROTOCOL.md "Media transfers") and asks only for the blocks it lacks.
import { GatewayError } from './gateway';
import { sendMedia, TransferError, type MediaFile, type Sent, type Signal } from './mediasend';
import type { KVStore } from './phone';

/** How long a kept send may be resumed, in ms: the longest node.invoke (600 s), then it is dropped. */
export const OUTBOX_TTL_MS = 600_000;
/** At most this many sends are kept; the oldest goes first. */
export const OUTBOX_MAX = 4;

const INDEX = 'outbox';
const entryKey = (id: string) => `send:${id}`;

/** One kept send: the file (its bytes included) and until when it may be resumed (Unix ms). */
export interface KeptSend {
  file: MediaFile;
  expiresAt: number;
}

/** What a resumed send did (the page shows it). */
export interface Resumed {
  id: string;
  name: string;
  sent: Sent;
}

/**
 * The kept sends, in a KVStore (IndexedDB "atrium-outbox" in the page; a MemoryKV in tests). Its calls run one
 * after another; a failing store is reported by the promise, and the page sends anyway (it just cannot resume).
 */
export class Outbox {
  private chain: Promise<unknown> = Promise.resolve();
  /** Transfer ids this page is sending now: a resume never starts a second send of one. */
  readonly active = new Set<string>();

  constructor(
    private readonly kv: KVStore,
    private readonly now: () => number = Date.now,
  ) {}

  private serial<T>(f: () => Promise<T>): Promise<T> {
    const p = this.chain.then(f, f);
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Keeps file (replacing a kept send of the same id), dropping the oldest beyond OUTBOX_MAX. */
  keep(file: MediaFile): Promise<void> {
    return this.serial(async () => {
      const ids = ((await this.kv.get<string[]>(INDEX)) ?? []).filter((x) => x !== file.id);
      ids.push(file.id);
      while (ids.length > OUTBOX_MAX) await this.kv.delete(entryKey(ids.shift()!));
      await this.kv.set(entryKey(file.id), { file, expiresAt: this.now() + OUTBOX_TTL_MS } satisfies KeptSend);
      await this.kv.set(INDEX, ids);
    });
  }

  /** Forgets the send of transfer id. */
  drop(id: string): Promise<void> {
    return this.serial(async () => {
      const ids = (await this.kv.get<string[]>(INDEX)) ?? [];
      await this.kv.delete(entryKey(id));
      await this.kv.set(
        INDEX,
        ids.filter((x) => x !== id),
      );
    });
  }

  /** The kept sends still in time, oldest first; expired ones are dropped. */
  list(): Promise<KeptSend[]> {
    return this.serial(async () => {
      const ids = (await this.kv.get<string[]>(INDEX)) ?? [];
      const out: KeptSend[] = [];
      const live: string[] = [];
      for (const id of ids) {
        const e = await this.kv.get<KeptSend>(entryKey(id));
        if (e && e.file?.data && e.expiresAt > this.now()) {
          out.push(e);
          live.push(id);
        } else {
          await this.kv.delete(entryKey(id));
        }
      }
      if (live.length !== ids.length) await this.kv.set(INDEX, live);
      return out;
    });
  }
}

/** Whether a failed send may still be resumed later (by a page opened again): only a cut or a silent gateway. */
export function resumable(e: unknown): boolean {
  return e instanceof TransferError && !e.remote && (e.code === 'CLOSED' || e.code === 'TIMEOUT');
}

/**
 * Sends file with retries (sendMedia again with the same id: a resume) while it is cut (CLOSED), at most
 * retries more times, keeping it in outbox meanwhile (when given): it is dropped once the send ends, unless the
 * page dies first. onAttempt hears each finished send (the page shows how much a resume sent again).
 */
export async function sendKept(
  file: MediaFile,
  signal: Signal,
  o: { outbox?: Outbox; retries: number; abort?: AbortSignal; send?: typeof sendMedia },
): Promise<Sent & { attempts: number }> {
  const send = o.send ?? sendMedia;
  o.outbox?.active.add(file.id);
  await o.outbox?.keep(file).catch((e) => console.warn('atrium node: the send is not kept for a resume', e));
  try {
    for (let i = 0; ; i++) {
      try {
        return { ...(await send(file, signal, { signal: o.abort })), attempts: i + 1 };
      } catch (e) {
        if (!(e instanceof TransferError) || e.code !== 'CLOSED' || i >= o.retries) throw e;
      }
    }
  } finally {
    o.outbox?.active.delete(file.id);
    await o.outbox?.drop(file.id).catch(() => undefined);
  }
}

/**
 * Resumes the sends a page killed or reloaded in the middle left in outbox, through signalFor (node.media.offer
 * on the node connection just opened): each one the gateway still expects is finished (only its missing blocks
 * go) and reported to onResumed; one the gateway refuses (FORBIDDEN: the invoke ended, or another device) or
 * fails for good is dropped; one cut again stays for the next connection. Sends this page runs now are left alone.
 */
export async function resumeKept(outbox: Outbox, signalFor: (id: string) => Signal, onResumed: (r: Resumed) => void, send: typeof sendMedia = sendMedia): Promise<void> {
  let kept: KeptSend[];
  try {
    kept = await outbox.list();
  } catch (e) {
    console.warn('atrium node: the kept sends cannot be read', e);
    return;
  }
  for (const k of kept) {
    const id = k.file.id;
    if (outbox.active.has(id)) continue;
    outbox.active.add(id);
    try {
      const sent = await send(k.file, signalFor(id));
      onResumed({ id, name: k.file.name, sent });
      await outbox.drop(id);
    } catch (e) {
      const refused = e instanceof GatewayError ? e.code === 'FORBIDDEN' || e.code === 'INVALID_REQUEST' || e.code === 'NOT_FOUND' : !resumable(e);
      if (refused) await outbox.drop(id).catch(() => undefined);
      console.warn(`atrium node: resuming transfer ${id}: ${refused ? 'dropped' : 'kept for later'}`, e);
    } finally {
      outbox.active.delete(id);
    }
  }
}
