// The Nodes panel's gallery (issue 22 item 4): the stored photos, clips and recordings of the nodes
// (media.list), their thumbnails (media.get {id, thumb:true}: a JPEG the gateway makes of a JPEG or
// PNG), a full view (media.get {id}: a picture as a data: URL, a clip as a blob: URL for <video>),
// delete (media.delete) and "attach to a note" (media.attach) with the notes of memory.files; a file over
// media.get's 16 MiB is read in 1 MiB pieces (media.read) and checked whole; media.added and media.deleted
// keep the list current without a reload.
// Shapes: docs/PROTOCOL.md "Media in the app".

/** What the gallery needs of the gateway client (GatewayClient implements it). */
export interface GalleryGateway {
  supports(method: string): boolean;
  request<T = unknown>(method: string, params?: Record<string, unknown>, opts?: { timeoutMs?: number }): Promise<T>;
  /** Subscribes to an event (media.added, media.deleted); returns the unsubscribe. */
  on?(event: string, handler: (payload: any) => void): () => void; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One stored file: its sidecar as media.list gives it. */
export interface MediaItem {
  id: string;
  name: string;
  device: string;
  command: string;
  /** When it was stored (ms since the epoch; NaN dropped). */
  time: number;
  size: number;
  mime: string;
  width?: number;
  height?: number;
  durationMs?: number;
}

export interface MediaPage {
  items: MediaItem[];
  nextCursor: string;
}

/** Items asked for per media.list page. */
export const GALLERY_PAGE = 24;

/** media.get sends at most this many bytes inline (api.MaxMediaGetBytes): larger files cannot be
 *  opened in the app (a clip longer than that is named with its size, not played). */
export const MAX_INLINE_BYTES = 16 << 20;

const ID_RE = /^[0-9a-f]{32}$/;

/** The items of a media.list answer, malformed entries dropped. */
export function toMediaPage(res: unknown): MediaPage {
  const r = (res ?? {}) as { items?: unknown; nextCursor?: unknown };
  const items: MediaItem[] = [];
  for (const raw of Array.isArray(r.items) ? r.items : []) {
    const m = (raw ?? {}) as Record<string, unknown>;
    if (typeof m.id !== 'string' || !ID_RE.test(m.id)) continue;
    const time = typeof m.time === 'string' ? Date.parse(m.time) : NaN;
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined);
    items.push({
      id: m.id,
      name: typeof m.name === 'string' ? m.name : '',
      device: typeof m.device === 'string' ? m.device : '',
      command: typeof m.command === 'string' ? m.command : '',
      time: Number.isFinite(time) ? time : 0,
      size: num(m.size) ?? 0,
      mime: typeof m.mime === 'string' ? m.mime : '',
      width: num(m.width),
      height: num(m.height),
      durationMs: num(m.durationMs),
    });
  }
  return { items, nextCursor: typeof r.nextCursor === 'string' ? r.nextCursor : '' };
}

/** Appends a page to the items shown, skipping ids already there (a file stored between two pages). */
export function mergePage(shown: readonly MediaItem[], page: readonly MediaItem[]): MediaItem[] {
  const seen = new Set(shown.map((m) => m.id));
  return [...shown, ...page.filter((m) => !seen.has(m.id))];
}

/** Pictures the app shows (and may attach to a note). */
export function isPicture(mime: string): boolean {
  return ['image/jpeg', 'image/png', 'image/gif', 'image/webp'].includes(mime);
}

/** Pictures media.get makes a thumbnail of. */
export function hasThumb(mime: string): boolean {
  return mime === 'image/jpeg' || mime === 'image/png';
}

export function isVideo(mime: string): boolean {
  return mime.startsWith('video/') || mime.startsWith('audio/');
}

/** media.read serves at most this many bytes a call (api.MaxMediaReadBytes). */
export const MAX_READ_BYTES = 1 << 20;
/** The largest file the gallery assembles from media.read pieces to play it (a Blob in the page's memory). */
export const MAX_PLAY_BYTES = 512 << 20;

/** Whether the app can open the file: whole through media.get, or (canRead: the gateway serves media.read) in
 *  pieces up to MAX_PLAY_BYTES. Else the viewer says why not. */
export function openable(m: MediaItem, canRead = false): boolean {
  return m.size <= MAX_INLINE_BYTES || (canRead && m.size <= MAX_PLAY_BYTES);
}

/** Reads a stored file with media.read in pieces of MAX_READ_BYTES and checks the whole against the size and
 *  SHA-256 the gateway names (a file remuxed or deleted while it was read fails); onProgress hears the bytes
 *  read so far; stop() true ends the read (null). */
export async function readPieces(
  gw: GalleryGateway,
  m: Pick<MediaItem, 'id' | 'size'>,
  onProgress: (done: number, total: number) => void = () => undefined,
  stop: () => boolean = () => false,
): Promise<Uint8Array<ArrayBuffer>[] | null> {
  const parts: Uint8Array<ArrayBuffer>[] = [];
  let offset = 0;
  let size = m.size;
  let sha = '';
  for (;;) {
    if (stop()) return null;
    const r = await gw.request<{ offset?: number; size?: number; sha256?: string; eof?: boolean; dataBase64?: string }>(
      'media.read',
      { id: m.id, offset, length: MAX_READ_BYTES },
      { timeoutMs: 60_000 },
    );
    const b = fromBase64(typeof r?.dataBase64 === 'string' ? r.dataBase64 : '');
    if (r?.offset !== offset || typeof r.size !== 'number' || (sha && r.sha256 !== sha) || (offset > 0 && r.size !== size)) {
      throw new Error(`media.read ${m.id}: the file changed while it was read; open it again`);
    }
    size = r.size;
    sha = String(r.sha256 ?? '');
    parts.push(b);
    offset += b.length;
    onProgress(offset, size);
    if (r.eof || offset >= size) break;
    if (b.length === 0) throw new Error(`media.read ${m.id}: no data at ${offset} of ${size} bytes`);
  }
  const whole = new Uint8Array(offset);
  let at = 0;
  for (const p of parts) {
    whole.set(p, at);
    at += p.length;
  }
  const digest = Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', whole)), (x) => x.toString(16).padStart(2, '0')).join('');
  if (offset !== size || digest !== sha) throw new Error(`media.read ${m.id}: the pieces do not make the stored file (${offset} of ${size} bytes); open it again`);
  return parts;
}

/** "1:05" for 65 000 ms. */
export function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/** The bytes of a base64 string. */
export function fromBase64(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** The notes a photo may be attached to: memory Markdown files of memory.files (not OpenClaw's
 *  context files), sorted, at most limit. */
export function noteChoices(res: unknown, limit = 500): string[] {
  const files = (res ?? {}) as { files?: unknown };
  const out: string[] = [];
  for (const f of Array.isArray(files.files) ? files.files : []) {
    const p = (f ?? {}) as { path?: unknown; context?: unknown };
    if (typeof p.path === 'string' && /\.md$/i.test(p.path) && p.context !== true) out.push(p.path);
  }
  return out.sort().slice(0, limit);
}
