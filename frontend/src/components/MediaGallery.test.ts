// The Nodes panel's gallery against a scripted gateway: thumbnails from media.get thumb, a picture
// opened full size and a clip played from a blob, delete only after the confirm, attach to a note
// picked from memory.files, a clip over the inline limit named not fetched, keyboard (Escape closes,
// focus returns), en and zh.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import MediaGallery from './MediaGallery.svelte';
import { resetLang, setLang } from '../lib/i18n.svelte';
import { MAX_INLINE_BYTES, MAX_READ_BYTES, mergePage, noteChoices, readPieces, toMediaPage } from '../lib/gallery';

const PHOTO = 'a'.repeat(32);
const CLIP = 'b'.repeat(32);
const HUGE = 'c'.repeat(32);

function meta(id: string, command: string, mime: string, size: number, extra: Record<string, unknown> = {}) {
  return { id, file: id, device: 'd'.repeat(64), command, time: '2026-12-03T10:00:00Z', size, sha256: 'e'.repeat(64), mime, transport: 'webrtc', ...extra };
}

/** A scripted gateway: answers by method, records every call; emit() delivers an event to on() handlers. */
function fakeGateway(answers: Record<string, (p: Record<string, unknown>) => unknown>) {
  const calls: { method: string; params: Record<string, unknown> }[] = [];
  const handlers = new Map<string, Set<(p: unknown) => void>>();
  const on = (event: string, h: (p: unknown) => void) => {
    if (!handlers.has(event)) handlers.set(event, new Set());
    handlers.get(event)!.add(h);
    return () => handlers.get(event)!.delete(h);
  };
  const emit = (event: string, p: unknown) => handlers.get(event)?.forEach((h) => h(p));
  async function request<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    calls.push({ method, params });
    const f = answers[method];
    if (!f) throw Object.assign(new Error(`${method}: not served`), { code: 'NOT_FOUND' });
    return (await f(params)) as T;
  }
  return { calls, supports: (m: string) => m in answers, request, on, emit };
}

/** Node's Buffer (the tests run in Node; the page's types do not name it). */
type NodeBuf = { toString(enc: 'base64' | 'latin1'): string };
const NodeBuffer = (globalThis as unknown as {
  Buffer: { from(b: ArrayBufferLike, offset: number, length: number): NodeBuf; from(s: string, enc: 'base64'): NodeBuf };
}).Buffer;

/** A browser's atob is native; jsdom's is JavaScript and took seconds over 16 MiB of pieces on a loaded machine
 *  (a clip read in pieces once missed its 10 s wait): the tests that move megabytes use Node's. */
function nativeAtob() {
  vi.stubGlobal('atob', (s: string) => NodeBuffer.from(s, 'base64').toString('latin1'));
  return () => vi.unstubAllGlobals();
}

/** media.read over bytes (its sha256 the bytes' own unless sha is given). */
async function reader(bytes: Uint8Array, sha?: string) {
  const digest = sha ?? Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>)), (x) => x.toString(16).padStart(2, '0')).join('');
  return (p: Record<string, unknown>) => {
    const off = Number(p.offset);
    const part = bytes.subarray(off, Math.min(bytes.length, off + Number(p.length)));
    // Node's own encoder: jsdom's btoa, in JavaScript, took seconds over
    // 16 MiB on a loaded machine (the gateway's side is not under test).
    const dataBase64 = NodeBuffer.from(part.buffer, part.byteOffset, part.length).toString('base64');
    return { id: p.id, offset: off, length: part.length, size: bytes.length, sha256: digest, eof: off + part.length >= bytes.length, dataBase64 };
  };
}

function gallery(extra: Record<string, (p: Record<string, unknown>) => unknown> = {}) {
  return fakeGateway({
    'media.list': () => ({
      items: [
        meta(PHOTO, 'camera.snap', 'image/jpeg', 2048, { width: 640, height: 480 }),
        meta(CLIP, 'camera.clip', 'video/webm', 9, { durationMs: 65_000 }),
        meta(HUGE, 'screen.record', 'video/webm', MAX_INLINE_BYTES + 1),
      ],
    }),
    'media.get': (p) => (p.thumb ? { mime: 'image/jpeg', thumb: true, dataBase64: 'VEhVTUI=' } : p.id === PHOTO ? { mime: 'image/jpeg', dataBase64: 'RlVMTA==' } : { mime: 'video/webm', dataBase64: 'GkXfo0AAAAAA' }),
    'media.delete': () => ({ deleted: true }),
    'memory.files': () => ({ files: [{ path: 'memory/shared/trip.md' }, { path: 'MEMORY.md' }, { path: 'SOUL.md', context: true }, { path: 'memory/x.png' }] }),
    'media.attach': () => ({ attachment: 'memory/shared/attachments/x.jpg', note: { path: 'memory/shared/trip.md' } }),
    ...extra,
  });
}

beforeEach(() => {
  resetLang();
  URL.createObjectURL = vi.fn(() => 'blob:clip');
  URL.revokeObjectURL = vi.fn();
});

describe('media gallery', () => {
  it('lists newest first with thumbnails of pictures only, then opens a photo full size', async () => {
    const gw = gallery();
    render(MediaGallery, { gw, connected: true });
    const tiles = await screen.findAllByTestId('gallery-item');
    expect(tiles.map((t) => t.dataset.mediaId)).toEqual([PHOTO, CLIP, HUGE]);
    await waitFor(() => expect(screen.getByTestId('gallery-thumb').getAttribute('src')).toBe('data:image/jpeg;base64,VEhVTUI='));
    // Only the JPEG's thumbnail is asked for; the clips show a play sign and their length.
    expect(gw.calls.filter((c) => c.method === 'media.get').map((c) => c.params)).toEqual([{ id: PHOTO, thumb: true }]);
    expect(tiles[1].textContent).toContain('1:05');
    expect(tiles[0].getAttribute('aria-label')).toContain('camera.snap');

    await fireEvent.click(tiles[0]);
    await waitFor(() => expect(screen.getByTestId('gallery-full').getAttribute('src')).toBe('data:image/jpeg;base64,RlVMTA=='));
    expect(screen.getByTestId('gallery-facts').textContent).toContain('640×480');
    expect(document.activeElement).toBe(screen.getByTestId('gallery-close'));
    // Escape closes and gives the focus back to the tile.
    await fireEvent.keyDown(window, { key: 'Escape' });
    expect(screen.queryByTestId('gallery-viewer')).toBeNull();
    expect(document.activeElement).toBe(tiles[0]);
  });

  it('plays a clip from a blob of its bytes; a clip over the inline limit is named, not fetched', async () => {
    const gw = gallery();
    render(MediaGallery, { gw, connected: true });
    const tiles = await screen.findAllByTestId('gallery-item');
    await fireEvent.click(tiles[1]);
    await waitFor(() => expect(screen.getByTestId('gallery-video').getAttribute('src')).toBe('blob:clip'));
    const blob = (URL.createObjectURL as ReturnType<typeof vi.fn>).mock.calls[0][0] as Blob;
    expect(blob.type).toBe('video/webm');
    expect(blob.size).toBe(9);
    expect(screen.queryByTestId('gallery-attach')).toBeNull(); // a clip is not attached to notes
    await fireEvent.click(screen.getByTestId('gallery-close'));
    expect(URL.revokeObjectURL).toHaveBeenCalledWith('blob:clip');

    const before = gw.calls.length;
    await fireEvent.click(tiles[2]);
    expect((await screen.findByTestId('gallery-open-error')).textContent).toMatch(/up to 16\.0 MiB/);
    expect(gw.calls.length).toBe(before);
  });

  it('deletes only after the confirm', async () => {
    const gw = gallery();
    render(MediaGallery, { gw, connected: true });
    await fireEvent.click((await screen.findAllByTestId('gallery-item'))[0]);
    await fireEvent.click(screen.getByTestId('gallery-delete'));
    expect(gw.calls.some((c) => c.method === 'media.delete')).toBe(false);
    await fireEvent.click(screen.getByTestId('gallery-delete-confirm'));
    await waitFor(() => expect(screen.queryByTestId('gallery-viewer')).toBeNull());
    expect(gw.calls.find((c) => c.method === 'media.delete')?.params).toEqual({ id: PHOTO });
    expect(screen.getAllByTestId('gallery-item').map((t) => t.dataset.mediaId)).toEqual([CLIP, HUGE]);
  });

  it('attaches a photo to a note picked from memory.files, and says where (zh)', async () => {
    setLang('zh');
    const gw = gallery();
    render(MediaGallery, { gw, connected: true });
    await fireEvent.click((await screen.findAllByTestId('gallery-item'))[0]);
    await fireEvent.click(await screen.findByTestId('gallery-attach'));
    const pick = (await screen.findByTestId('gallery-note')) as HTMLSelectElement;
    await waitFor(() => expect([...pick.options].map((o) => o.value)).toEqual(['MEMORY.md', 'memory/shared/trip.md']));
    await fireEvent.change(pick, { target: { value: 'memory/shared/trip.md' } });
    await fireEvent.input(screen.getByTestId('gallery-caption'), { target: { value: '湖边 ' } });
    await fireEvent.click(screen.getByTestId('gallery-attach-go'));
    await waitFor(() => expect(screen.getByTestId('gallery-attached').textContent).toContain('已附加到 memory/shared/trip.md'));
    expect(gw.calls.find((c) => c.method === 'media.attach')?.params).toEqual({ id: PHOTO, path: 'memory/shared/trip.md', caption: '湖边' });
  });

  it('shows the gateway\'s refusal of an attach and of the list; says so when media is not served', async () => {
    const gw = gallery({
      'media.attach': () => Promise.reject(Object.assign(new Error('media.attach: no space left on device'), { code: 'UNAVAILABLE' })),
    });
    render(MediaGallery, { gw, connected: true });
    await fireEvent.click((await screen.findAllByTestId('gallery-item'))[0]);
    await fireEvent.click(await screen.findByTestId('gallery-attach'));
    await waitFor(() => expect((screen.getByTestId('gallery-note') as HTMLSelectElement).value).toBe('MEMORY.md'));
    await fireEvent.click(screen.getByTestId('gallery-attach-go'));
    expect((await screen.findByTestId('gallery-action-error')).textContent).toContain('no space left on device');
    expect(screen.queryByTestId('gallery-attached')).toBeNull();
  });

  it('says the list failed, and that media is not served here', async () => {
    const refused = gallery({ 'media.list': () => Promise.reject(Object.assign(new Error('media.list: forbidden'), { code: 'FORBIDDEN' })) });
    const { unmount } = render(MediaGallery, { gw: refused, connected: true });
    expect((await screen.findByTestId('gallery-error')).textContent).toContain('forbidden');
    unmount();
    setLang('zh');
    render(MediaGallery, { gw: fakeGateway({}), connected: true });
    expect(screen.getByTestId('gallery-unavailable').textContent).toContain('节点拍摄的照片');
  });

  it('pages on with the cursor without showing an item twice', async () => {
    let n = 0;
    const gw = gallery({
      'media.list': (p) => {
        n++;
        return p.cursor === 'c1' ? { items: [meta(CLIP, 'camera.clip', 'video/webm', 9), meta(HUGE, 'screen.record', 'video/webm', 9)] } : { items: [meta(PHOTO, 'camera.snap', 'image/png', 9), meta(CLIP, 'camera.clip', 'video/webm', 9)], nextCursor: 'c1' };
      },
    });
    render(MediaGallery, { gw, connected: true });
    await fireEvent.click(await screen.findByTestId('gallery-more'));
    await waitFor(() => expect(screen.getAllByTestId('gallery-item').map((t) => t.dataset.mediaId)).toEqual([PHOTO, CLIP, HUGE]));
    expect(n).toBe(2);
    expect(screen.queryByTestId('gallery-more')).toBeNull();
  });
});

describe('media events and large files', () => {
  it('adds a stored file on media.added and removes one on media.deleted, closing its viewer', async () => {
    const gw = gallery();
    render(MediaGallery, { gw, connected: true });
    await screen.findAllByTestId('gallery-item');
    const NEW = 'f'.repeat(32);
    gw.emit('media.added', meta(NEW, 'camera.snap', 'image/png', 99));
    gw.emit('media.added', meta(NEW, 'camera.snap', 'image/png', 99)); // twice: shown once
    await waitFor(() => expect(screen.getAllByTestId('gallery-item').map((t) => t.dataset.mediaId)).toEqual([NEW, PHOTO, CLIP, HUGE]));
    await waitFor(() => expect(gw.calls.some((c) => c.method === 'media.get' && c.params.id === NEW && c.params.thumb)).toBe(true));
    await fireEvent.click(screen.getAllByTestId('gallery-item')[1]);
    await screen.findByTestId('gallery-viewer');
    gw.emit('media.deleted', { id: PHOTO });
    await waitFor(() => expect(screen.getAllByTestId('gallery-item').map((t) => t.dataset.mediaId)).toEqual([NEW, CLIP, HUGE]));
    expect(screen.queryByTestId('gallery-viewer')).toBeNull();
    gw.emit('media.deleted', { id: 'nope' });
    gw.emit('media.added', { id: '../x' });
    expect(screen.getAllByTestId('gallery-item')).toHaveLength(3);
  });

  it('plays a clip over the inline limit from media.read pieces, checked whole', async () => {
    const bytes = new Uint8Array(MAX_INLINE_BYTES + 1);
    for (let i = 0; i < bytes.length; i += 4096) bytes[i] = i & 0xff;
    const gw = gallery({ 'media.read': await reader(bytes) });
    const restore = nativeAtob();
    try {
      render(MediaGallery, { gw, connected: true });
      await fireEvent.click((await screen.findAllByTestId('gallery-item'))[2]);
      await waitFor(() => expect(screen.getByTestId('gallery-video').getAttribute('src')).toBe('blob:clip'), { timeout: 10_000 });
    } finally {
      restore();
    }
    const reads = gw.calls.filter((c) => c.method === 'media.read');
    expect(reads.length).toBe(Math.ceil(bytes.length / MAX_READ_BYTES));
    expect(reads.every((c) => c.params.id === HUGE && Number(c.params.length) === MAX_READ_BYTES)).toBe(true);
    expect(gw.calls.some((c) => c.method === 'media.get' && c.params.id === HUGE)).toBe(false);
  });

  it('refuses pieces that do not make the stored file', async () => {
    const bytes = new Uint8Array(3 * MAX_READ_BYTES + 5).fill(7);
    const gw = gallery({ 'media.read': await reader(bytes, '0'.repeat(64)) });
    await expect(readPieces(gw, { id: HUGE, size: bytes.length })).rejects.toThrow(/do not make the stored file/);
    const ok = gallery({ 'media.read': await reader(bytes) });
    const seen: number[] = [];
    const parts = await readPieces(ok, { id: HUGE, size: bytes.length }, (done) => seen.push(done));
    expect(parts?.reduce((n, p) => n + p.length, 0)).toBe(bytes.length);
    expect(seen).toEqual([MAX_READ_BYTES, 2 * MAX_READ_BYTES, 3 * MAX_READ_BYTES, bytes.length]);
    // The file changes between two reads (another sha256): refused at once.
    let n = 0;
    const changing = gallery({ 'media.read': async (p) => ({ ...(await reader(bytes))(p), sha256: n++ === 0 ? 'a'.repeat(64) : 'b'.repeat(64) }) });
    await expect(readPieces(changing, { id: HUGE, size: bytes.length })).rejects.toThrow(/changed while it was read/);
    expect(await readPieces(ok, { id: HUGE, size: bytes.length }, undefined, () => true)).toBeNull();
  });
});

describe('gallery helpers', () => {
  it('drops malformed items and keeps notes only', () => {
    expect(toMediaPage({ items: [{ id: '../x' }, meta(PHOTO, 'camera.snap', 'image/jpeg', 1)], nextCursor: 5 })).toMatchObject({ items: [{ id: PHOTO }], nextCursor: '' });
    expect(mergePage([{ id: PHOTO } as never], [{ id: PHOTO } as never, { id: CLIP } as never]).map((m) => m.id)).toEqual([PHOTO, CLIP]);
    expect(noteChoices({ files: [{ path: 'b.md' }, { path: 'A.MD' }, { path: 'x.png' }, { path: 'SOUL.md', context: true }, {}] })).toEqual(['A.MD', 'b.md']);
  });
});
