// A chat picture: fetched through media.get and shown inline; where the gateway refuses (not the
// person at this machine) the chat says so, in en and zh.
import { beforeEach, describe, expect, it } from 'vitest';
import { render, screen, waitFor } from '@testing-library/svelte';
import ChatImage from './ChatImage.svelte';
import { clearMediaCache } from '../lib/mediaview';
import { resetLang, setLang } from '../lib/i18n.svelte';

const image = { mediaId: '0123456789abcdef0123456789abcdef', mime: 'image/jpeg', width: 640, height: 480 };

beforeEach(() => {
  clearMediaCache();
  resetLang();
});

describe('chat picture', () => {
  it('shows the photo media.get returns', async () => {
    const gw = { request: async <T,>() => ({ mime: 'image/jpeg', dataBase64: '/9j/AA==' }) as T };
    render(ChatImage, { gw, image, n: 1 });
    await waitFor(() => expect(screen.getByRole('img').getAttribute('src')).toBe('data:image/jpeg;base64,/9j/AA=='));
    expect(screen.getByRole('img').getAttribute('alt')).toBe('Photo 1');
    expect(screen.getByTestId('chat-image').dataset.mediaId).toBe(image.mediaId);
  });
  it('says why a photo cannot be shown (zh)', async () => {
    setLang('zh');
    const gw = { request: async <T,>(): Promise<T> => Promise.reject(new Error('media.get is not allowed here')) };
    render(ChatImage, { gw, image, n: 2 });
    await waitFor(() => expect(screen.getByTestId('chat-image-error').textContent).toContain('此处无法显示照片'));
    expect(screen.queryByRole('img')).toBeNull();
  });
});
