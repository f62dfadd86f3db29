// The chat's waiting words (issue 27, interrupt "queue"; docs/PROTOCOL.md "Talk"): the panel with a
// continuous talk open against a scripted gateway and fake browser parts. A queued transcript shows
// as the person's message marked waiting until the chat has the real one; words the gateway will not
// send (a failed send, a talk ended forbidden or at shutdown) give way to the talk's note naming them.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import { get } from 'svelte/store';
import ChatPanel from './ChatPanel.svelte';
import { GatewayClient } from '../lib/gateway';
import { FakeWebSocket } from '../lib/testing/fakeWebSocket';
import { FakePC, FakeRecorder } from '../lib/testing/fakeTalk';
import { resetLang, setLang } from '../lib/i18n.svelte';

// Generous: the machine running the tests may be loaded (nothing here measures time).
const WAIT = { timeout: 10_000 };
const OPENED = {
  talkId: 't1',
  sessionKey: 'main/s1',
  mode: 'continuous',
  lang: 'auto',
  interrupt: 'queue',
  stt: { provider: 'openai', model: 'whisper-1' },
  tts: { provider: 'openai', voice: 'alloy', speed: 1 },
  limits: { maxUtteranceMs: 60000, maxUtteranceBytes: 2097152, maxChunkBytes: 16384 },
};

beforeEach(() => {
  FakeWebSocket.reset();
  FakeRecorder.all = [];
  resetLang();
  localStorage.clear();
  vi.stubGlobal('navigator', { ...globalThis.navigator, mediaDevices: { getUserMedia: async () => ({ getTracks: () => [] }) } });
  vi.stubGlobal('RTCPeerConnection', FakePC);
  vi.stubGlobal('MediaRecorder', FakeRecorder);
  vi.stubGlobal('AudioContext', undefined);
});
const gws: GatewayClient[] = [];
afterEach(() => {
  cleanup();
  for (const gw of gws.splice(0)) gw.stop();
  vi.unstubAllGlobals();
  resetLang();
});

/** The panel of profile main, connected, its (empty) history read and a continuous talk open. */
async function openTalk() {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
  gws.push(gw);
  gw.start();
  const ws = FakeWebSocket.last();
  ws.handshake();
  render(ChatPanel, { gw, conn: get(gw.status), profileId: 'main' });
  const answered = new Set<string>();
  await answer(ws, answered, 'history.profile', { messages: [], active: [] });
  await fireEvent.click(await screen.findByTestId('talk-continuous'));
  expect(await answer(ws, answered, 'talk.open', OPENED)).toMatchObject({ mode: 'continuous' });
  await answer(ws, answered, 'talk.offer', { sdp: 'v=0 answer' });
  await waitFor(() => expect(screen.getByTestId('talk').dataset.talkState).toBe('listening'), WAIT);
  return { gw, ws, answered };
}

/** Answers the first request for method not answered yet (waiting for it); returns its params. */
async function answer(ws: FakeWebSocket, answered: Set<string>, method: string, payload: unknown) {
  const pending = () => ws.sent.find((f) => f.method === method && !answered.has(f.id));
  await waitFor(() => expect(pending()).toBeTruthy(), WAIT);
  const f = pending();
  answered.add(f.id);
  ws.reply(f, payload);
  return f.params;
}

const heard = (ws: FakeWebSocket, p: Record<string, unknown>) =>
  ws.serverEvent('talk.transcript', { talkId: 't1', lang: 'en', durationMs: 900, sent: true, ...p });
const waitingTexts = () => screen.queryAllByTestId('chat-talk-waiting').map((li) => li.querySelector('[data-testid="chat-message-text"]')?.textContent);
const userTexts = () =>
  screen
    .queryAllByTestId('chat-message-text')
    .filter((el) => el.closest('[data-testid="chat-talk-waiting"]') === null && el.closest('.user') !== null)
    .map((el) => el.textContent?.trim());

describe('words waiting for the current answer', () => {
  it('stay until the chat has the real message of their run, which then shows in their place', async () => {
    const { ws, answered } = await openTalk();
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', queued: true });
    heard(ws, { utteranceId: 'u2', text: '后天呢？', queued: true });
    await waitFor(() => expect(waitingTexts()).toEqual(['And tomorrow?', '后天呢？']), WAIT);
    expect(screen.getAllByTestId('chat-talk-waiting-note')[0].textContent).toBe('Waiting: sent when the current answer ends');

    // u1 went out as run r2: its bubble stays while the history that has it is being read.
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', runId: 'r2' });
    await waitFor(() => expect(ws.sent.filter((f) => f.method === 'history.profile' && !answered.has(f.id))).toHaveLength(1), WAIT);
    expect(waitingTexts()).toEqual(['And tomorrow?', '后天呢？']);
    const ts = Date.now();
    await answer(ws, answered, 'history.profile', { messages: [{ id: 'm1', sessionId: 's1', runId: 'r2', role: 'user', content: 'And tomorrow?', ts }], active: [] });
    await waitFor(() => expect(waitingTexts()).toEqual(['后天呢？']), WAIT);
    expect(userTexts()).toEqual(['And tomorrow?']);
  });

  it('ended forbidden: the words still waiting are removed and named as not sent (English and Chinese)', async () => {
    for (const [reason, l, words] of [
      ['forbidden', 'en', 'Not sent, because the talk ended: “And tomorrow?”, “后天呢？”'],
      ['shutdown', 'zh', '语音已结束，以下内容未发送：“And tomorrow?”、“后天呢？”'],
    ] as const) {
      cleanup();
      FakeWebSocket.reset();
      setLang(l);
      const { ws } = await openTalk();
      heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', queued: true });
      heard(ws, { utteranceId: 'u2', text: '后天呢？', queued: true });
      await waitFor(() => expect(waitingTexts()).toHaveLength(2), WAIT);
      ws.serverEvent('talk.ended', { talkId: 't1', reason });
      await waitFor(() => expect(screen.getByTestId('talk-note').textContent).toContain(words), WAIT);
      expect(waitingTexts()).toEqual([]);
    }
  });

  it('ended otherwise: they stay until the gateway sends them after the talk, then the message takes their place', async () => {
    const { ws, answered } = await openTalk();
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', queued: true });
    await waitFor(() => expect(waitingTexts()).toEqual(['And tomorrow?']), WAIT);
    ws.serverEvent('talk.ended', { talkId: 't1', reason: 'idle' });
    await waitFor(() => expect(screen.getByTestId('talk').dataset.talkState).toBe('off'), WAIT);
    expect(waitingTexts()).toEqual(['And tomorrow?']);
    expect(screen.getByTestId('talk-note').textContent).not.toContain('Not sent');
    // The gateway sends them once the answer ends and says nothing more: the chat's next history has them.
    ws.serverEvent('chat.final', { profileId: 'main', sessionId: 's1', runId: 'r1', messageId: 'a1', text: 'Sunny.' });
    await answer(ws, answered, 'history.profile', {
      messages: [{ id: 'm2', sessionId: 's1', runId: 'r3', role: 'user', content: 'And tomorrow?', ts: Date.now() }],
      active: [],
    });
    await waitFor(() => expect(waitingTexts()).toEqual([]), WAIT);
    expect(userTexts()).toEqual(['And tomorrow?']);
  });

  it('a send that failed (TALK_SEND_FAILED): the bubble gives way to the note naming the words', async () => {
    const { ws } = await openTalk();
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', queued: true });
    await waitFor(() => expect(waitingTexts()).toEqual(['And tomorrow?']), WAIT);
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', sent: false, errorCode: 'TALK_SEND_FAILED', error: 'the words could not be sent' });
    await waitFor(() => expect(waitingTexts()).toEqual([]), WAIT);
    const note = screen.getByTestId('talk-note').textContent ?? '';
    expect(note).toContain('Not sent: “And tomorrow?”');
    expect(note).not.toContain('the words could not be sent'); // the page's words, not the gateway's sentence
    expect(screen.getByTestId('talk').dataset.talkState).toBe('listening'); // the talk goes on
  });
});
