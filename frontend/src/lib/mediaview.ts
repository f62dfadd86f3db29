// The chat's pictures: a stored photo (backend/media) fetched through media.get {id} →
// {mime, dataBase64} and shown as a data: URL. media.get answers the person only (at this machine, or
// on a device scoped admin: docs/PROTOCOL.md "Media in the app"); elsewhere the request fails and
// the chat says so.

/** What mediaSource needs of the gateway client. */
export interface MediaRequester {
  request<T = unknown>(method: string, params?: Record<string, unknown>, opts?: { timeoutMs?: number }): Promise<T>;
}

/** How many pictures' data URLs stay cached (the newest). */
export const MEDIA_CACHE = 24;

/** The image types shown inline; anything else the gateway sends is refused. */
const SHOWN = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'];

const cache = new Map<string, Promise<string>>();

/**
 * The data: URL of media `id` (a cached promise, so a picture shown in several messages or
 * re-rendered is fetched once). A failed fetch is not kept: the next call tries again.
 */
export function mediaSource(gw: MediaRequester, id: string): Promise<string> {
  const hit = cache.get(id);
  if (hit) return hit;
  const p = gw.request<{ mime?: string; dataBase64?: string }>('media.get', { id }, { timeoutMs: 30_000 }).then((r) => {
    const mime = typeof r?.mime === 'string' ? r.mime : '';
    if (!SHOWN.includes(mime) || typeof r?.dataBase64 !== 'string' || r.dataBase64 === '') {
      throw new Error(`media ${id} is not a picture (${mime || 'no type'})`);
    }
    return `data:${mime};base64,${r.dataBase64}`;
  });
  cache.set(id, p);
  p.catch(() => cache.delete(id));
  while (cache.size > MEDIA_CACHE) cache.delete(cache.keys().next().value as string);
  return p;
}

/** Empties the cache (tests). */
export function clearMediaCache(): void {
  cache.clear();
}
