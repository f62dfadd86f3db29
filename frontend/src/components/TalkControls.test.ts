// The talk button against a scripted gateway (issue 27): with no transcription server set, talk.open's
// TALK_NO_STT becomes words that say what is missing and a way to Settings → Talk (the desktop) or
// who can set it (the phone), in English and Chinese; nothing is left waiting.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import TalkControls from './TalkControls.svelte';
import { GatewayClient } from '../lib/gateway';
import { FakeWebSocket } from '../lib/testing/fakeWebSocket';
import { resetLang, setLang } from '../lib/i18n.svelte';

function connect() {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
  gw.start();
  const ws = FakeWebSocket.last();
  ws.handshake();
  return { gw, ws };
}

beforeEach(() => {
  FakeWebSocket.reset();
  resetLang();
  // A browser with a microphone, WebRTC and an Opus recorder: the gateway's answer decides.
  vi.stubGlobal('navigator', { ...globalThis.navigator, mediaDevices: { getUserMedia: vi.fn() } });
  vi.stubGlobal('RTCPeerConnection', class {});
  vi.stubGlobal('MediaRecorder', Object.assign(class {}, { isTypeSupported: (t: string) => t.startsWith('audio/webm') }));
});
afterEach(() => {
  vi.unstubAllGlobals();
  resetLang();
});

async function refuse(ws: FakeWebSocket) {
  await waitFor(() => expect(ws.lastRequest('talk.open')).toBeTruthy());
  const req = ws.lastRequest('talk.open');
  ws.serverSend({ type: 'res', id: req.id, ok: false, error: { code: 'TALK_NO_STT', message: 'no transcription server is set (Settings → Talk)', details: { setting: 'talk.stt' } } });
  return req.params;
}

describe('talk button', () => {
  it('with nothing configured says what is missing and opens Settings → Talk (desktop, English)', async () => {
    const { gw, ws } = connect();
    const opened: number[] = [];
    render(TalkControls, { gw, connected: true, profileId: 'main', sessionId: 's1', onopensettings: () => opened.push(1) });
    await fireEvent.click(screen.getByTestId('talk-button'));
    expect(await refuse(ws)).toMatchObject({ sessionKey: 'main/s1', mode: 'ptt' });
    const p = await screen.findByTestId('talk-problem');
    expect(p.dataset.code).toBe('TALK_NO_STT');
    expect(p.textContent).toContain('speech-to-text server');
    expect((navigator.mediaDevices.getUserMedia as ReturnType<typeof vi.fn>).mock.calls).toHaveLength(0);
    expect((screen.getByTestId('talk-button') as HTMLButtonElement).disabled).toBe(false); // nothing hangs
    await fireEvent.click(screen.getByTestId('talk-open-settings'));
    expect(opened).toEqual([1]);
  });

  it('on the phone (no Settings) says where to set it, in Chinese; the continuous toggle goes back off', async () => {
    setLang('zh');
    const { gw, ws } = connect();
    render(TalkControls, { gw, connected: true, profileId: 'main', sessionId: undefined });
    await fireEvent.click(screen.getByTestId('talk-continuous'));
    expect(await refuse(ws)).toMatchObject({ sessionKey: 'main', mode: 'continuous', lang: 'zh' });
    const p = await screen.findByTestId('talk-problem');
    expect(p.textContent).toContain('语音转文字服务器');
    expect(p.textContent).toContain('请在电脑上设置');
    expect(screen.queryByTestId('talk-open-settings')).toBeNull();
    expect(screen.getByTestId('talk-continuous').getAttribute('aria-pressed')).toBe('false');
  });

  it('in Chinese says why it cannot start without the gateway\'s English sentence', async () => {
    setLang('zh');
    const { gw, ws } = connect();
    render(TalkControls, { gw, connected: true, profileId: 'main', sessionId: 's1' });
    await fireEvent.click(screen.getByTestId('talk-button'));
    await waitFor(() => expect(ws.lastRequest('talk.open')).toBeTruthy());
    const req = ws.lastRequest('talk.open');
    const message = 'talk.open: this connection has a talk open already (at most 1); close it first';
    ws.serverSend({ type: 'res', id: req.id, ok: false, error: { code: 'UNAVAILABLE', message, retryable: true } });
    const p = await screen.findByTestId('talk-problem');
    expect(p.textContent).toContain('已有另一个语音会话');
    expect(p.textContent).not.toContain(message);
    expect(p.textContent?.match(/[A-Za-z]{3,}/g)).toBeNull();
    expect(p.title).toBe(message); // still there for whoever looks closer
  });
});
