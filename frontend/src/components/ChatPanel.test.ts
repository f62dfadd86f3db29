// The chat's waiting words (issue 27, interrupt "queue"; docs/PROTOCOL.md "Talk"): the panel with a
// continuous talk open against a scripted gateway and fake browser parts. A queued transcript shows
// as the person's message marked waiting until the chat has the real one; words the gateway will not
// send (a failed send, a talk ended forbidden or at shutdown) give way to the talk's note naming them.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import { tick } from 'svelte';
import { get } from 'svelte/store';
import ChatPanel from './ChatPanel.svelte';
import { GatewayClient } from '../lib/gateway';
import { FakeWebSocket } from '../lib/testing/fakeWebSocket';
import { FakePC, FakeRecorder } from '../lib/testing/fakeTalk';
import { resetLang, setLang } from '../lib/i18n.svelte';
import { LEFTOVER_WAIT_MS } from '../lib/talk';

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
const offs: (() => void)[] = [];
afterEach(() => {
  vi.useRealTimers();
  for (const off of offs.splice(0)) off();
  cleanup();
  for (const gw of gws.splice(0)) gw.stop();
  vi.unstubAllGlobals();
  resetLang();
});

/** The panel of profile main, connected, its (empty) history read and a continuous talk open. */
async function openTalk(policy: Record<string, unknown> = {}) {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
  gws.push(gw);
  gw.start();
  const ws = FakeWebSocket.last();
  ws.handshake(policy);
  // The panel follows the connection as App's does (conn={$status}).
  const { rerender } = render(ChatPanel, { gw, conn: get(gw.status), profileId: 'main' });
  offs.push(gw.status.subscribe((conn) => void rerender({ conn })));
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

  it('of an ended talk that never reach the chat give way to the note once the gateway\'s bound passed (a fake clock)', async () => {
    // No tick from the fake gateway for the clock's 11 minutes: the connection stays.
    const { ws } = await openTalk({ tickIntervalMs: 3_600_000 });
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', queued: true });
    await waitFor(() => expect(waitingTexts()).toEqual(['And tomorrow?']), WAIT);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    ws.serverEvent('talk.ended', { talkId: 't1', reason: 'connection_gone' });
    for (let i = 0; i < 5; i++) await tick();
    expect(screen.getByTestId('talk').dataset.talkState).toBe('off');
    vi.advanceTimersByTime(LEFTOVER_WAIT_MS - 1000);
    await tick();
    expect(waitingTexts()).toEqual(['And tomorrow?']); // still expected: the gateway may send it till then
    expect(screen.getByTestId('talk-note').textContent).not.toContain('And tomorrow?');
    setLang('zh');
    vi.advanceTimersByTime(2000);
    await tick();
    expect(waitingTexts()).toEqual([]);
    expect(screen.getByTestId('talk-note').textContent).toBe('语音结束时你说的话，10 分钟内未能进入对话。未发送：“And tomorrow?”');
    setLang('en');
    await tick();
    expect(screen.getByTestId('talk-note').textContent).toBe('What you said as the talk ended did not reach the chat within 10 minutes. Not sent: “And tomorrow?”');
  });

  it('of an ended talk give way to the note when the connection came back without them and nothing runs', async () => {
    const { ws } = await openTalk();
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', queued: true });
    heard(ws, { utteranceId: 'u2', text: '后天呢？', queued: true });
    await waitFor(() => expect(waitingTexts()).toHaveLength(2), WAIT);
    // The gateway went away (a restart drops what the talk left) and the page connects again.
    ws.serverClose(1006, 'gone');
    await waitFor(() => expect(screen.queryByTestId('talk')).toBeNull(), WAIT); // no talk without the gateway
    await waitFor(() => expect(FakeWebSocket.instances.length).toBe(2), WAIT);
    const back = FakeWebSocket.last();
    back.handshake();
    // Its history has the first (sent after the talk), not the second, and no run goes on.
    await answer(back, new Set(), 'history.profile', {
      messages: [{ id: 'm1', sessionId: 's1', runId: 'r3', role: 'user', content: 'And tomorrow?', ts: Date.now() }],
      active: [],
    });
    await waitFor(() => expect(waitingTexts()).toEqual([]), WAIT);
    expect(userTexts()).toEqual(['And tomorrow?']);
    expect(screen.getByTestId('talk-note').textContent).toBe('The connection to Atrium was lost, and what you said as the talk ended did not reach the chat. Not sent: “后天呢？”');
  });

  it('of an ended talk stay after a reconnect while the session still answers (the gateway sends them when it ends)', async () => {
    const { ws } = await openTalk();
    heard(ws, { utteranceId: 'u1', text: 'And tomorrow?', queued: true });
    await waitFor(() => expect(waitingTexts()).toHaveLength(1), WAIT);
    ws.serverClose(1006, 'gone');
    await waitFor(() => expect(FakeWebSocket.instances.length).toBe(2), WAIT);
    const back = FakeWebSocket.last();
    back.handshake();
    const answered = new Set<string>();
    await answer(back, answered, 'history.profile', {
      messages: [{ id: 'm0', sessionId: 's1', runId: 'r1', role: 'user', content: 'Tell me a long story.', ts: Date.now() }],
      active: [{ runId: 'r1', sessionId: 's1', profileId: 'main', content: 'Once upon', seq: 3, startedAt: Date.now() }],
    });
    await waitFor(() => expect(screen.queryAllByTestId('chat-message-text').some((el) => el.textContent?.includes('Once upon'))).toBe(true), WAIT);
    expect(waitingTexts()).toEqual(['And tomorrow?']);
    expect(screen.queryByTestId('talk-note')?.textContent ?? '').not.toContain('And tomorrow?');
  });
});
