import { beforeEach, describe, expect, it } from 'vitest';
import { MEDIA_CACHE, clearMediaCache, mediaSource, type MediaRequester } from './mediaview';

function requester(answer: (id: string) => unknown): MediaRequester & { calls: Array<[string, unknown]> } {
  const calls: Array<[string, unknown]> = [];
  return {
    calls,
    async request<T>(method: string, params?: Record<string, unknown>): Promise<T> {
      calls.push([method, params]);
      const a = answer(String(params?.id));
      if (a instanceof Error) throw a;
      return a as T;
    },
  };
}

beforeEach(() => clearMediaCache());

describe('media pictures', () => {
  it('fetches a picture once through media.get and shows it as a data URL', async () => {
    const gw = requester(() => ({ mime: 'image/jpeg', dataBase64: '/9j/AA==' }));
    expect(await mediaSource(gw, 'a')).toBe('data:image/jpeg;base64,/9j/AA==');
    expect(await mediaSource(gw, 'a')).toBe('data:image/jpeg;base64,/9j/AA==');
    expect(gw.calls).toEqual([['media.get', { id: 'a' }]]);
  });
  it('refuses what is not a shown picture type, and tries again after a failure', async () => {
    let fail = true;
    const gw = requester((id) => (id === 'svg' ? { mime: 'image/svg+xml', dataBase64: 'PHN2Zz4=' } : fail ? new Error('FORBIDDEN') : { mime: 'image/png', dataBase64: 'iVBO' }));
    await expect(mediaSource(gw, 'svg')).rejects.toThrow('not a picture');
    await expect(mediaSource(gw, 'p')).rejects.toThrow('FORBIDDEN');
    fail = false;
    expect(await mediaSource(gw, 'p')).toBe('data:image/png;base64,iVBO');
  });
  it('keeps at most MEDIA_CACHE pictures', async () => {
    const gw = requester(() => ({ mime: 'image/png', dataBase64: 'iVBO' }));
    for (let i = 0; i <= MEDIA_CACHE; i++) await mediaSource(gw, `id${i}`);
    await mediaSource(gw, 'id0'); // the oldest was dropped: fetched again
    expect(gw.calls).toHaveLength(MEDIA_CACHE + 2);
  });
});
