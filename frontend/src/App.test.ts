// The whole UI against a scripted gateway: checks the data-testid hooks the e2e test relies on.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from './App.svelte';
import { GatewayClient } from './lib/gateway';
import { FakeWebSocket } from './lib/testing/fakeWebSocket';

function setup() {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
  render(App, { props: { gw } });
  gw.start();
  const ws = FakeWebSocket.last();
  return { gw, ws };
}


const testid = (id: string) => screen.getByTestId(id);

beforeEach(() => {
  FakeWebSocket.reset();
  localStorage.clear();
});
afterEach(() => {
  localStorage.clear();
});

describe('App', () => {
  it('connects, loads state, chats with streaming, imports, searches', async () => {
    const { ws } = setup();
    await waitFor(() => expect(testid('conn-state').textContent).toBe('connecting'));
    ws.handshake();
    await waitFor(() => expect(testid('conn-state').textContent).toBe('connected'));

    const done = new Set<string>();
    await waitFor(() => expect(ws.sent.some((f) => f.method === 'history.profile')).toBe(true));
    expect(ws.lastRequest('history.profile').params).toEqual({ profileId: 'main', limit: 50 });
    ws.answerAll('profiles.list', { profiles: [{ id: 'main', name: 'Main', model: 'scripted' }] }, done);
    ws.answerAll('history.profile', { messages: [{ id: 'h1', role: 'user', content: '早上好', ts: 1, profileId: 'main', sessionId: 'old' }] }, done);
    ws.answerAll('memory.status', { state: 'ready', files: 2, chunks: 7, provider: 'local', model: 'mini' }, done);
    ws.answerAll('memory.files', { files: [{ path: 'memory/a.md', size: 10, mtime: 1, chunks: 1, layer: 'role', role: 'main' }] }, done);

    await waitFor(() => expect(testid('memory-status').textContent).toContain('ready'));
    expect(testid('memory-status').textContent).toContain('7 chunks');
    await waitFor(() => expect(screen.getAllByTestId('memory-file')[0].textContent).toContain('memory/a.md'));
    await waitFor(() => expect(screen.getAllByTestId('chat-message')).toHaveLength(1));

    // Chat: Enter sends.
    const input = testid('chat-input') as HTMLTextAreaElement;
    await fireEvent.input(input, { target: { value: 'hello <b>agent</b>' } });
    await fireEvent.keyDown(input, { key: 'Enter' });
    await waitFor(() => expect(ws.lastRequest('chat.send')).toBeDefined());
    const send = ws.lastRequest('chat.send');
    expect(send.params).toMatchObject({ profileId: 'main', message: 'hello <b>agent</b>' });
    expect(typeof send.params.idempotencyKey).toBe('string');
    expect(input.value).toBe('');
    ws.reply(send, { runId: 'r1', messageId: 'a1', sessionId: 's1', userMessageId: 'u1' });
    await waitFor(() => expect(testid('chat-cancel')).toBeTruthy());
    expect(localStorage.getItem('atrium.session.main')).toBe('s1');

    const ev = { runId: 'r1', profileId: 'main', sessionId: 's1', messageId: 'a1' };
    ws.serverEvent('chat.thinking', ev, 2);
    ws.serverEvent('chat.chunk', { ...ev, seq: 2, delta: ' world' }, 3);
    ws.serverEvent('chat.chunk', { ...ev, seq: 1, delta: 'Hello' }, 4);
    await waitFor(() => {
      const a = screen.getAllByTestId('chat-message').find((m) => m.dataset.role === 'assistant');
      expect(a?.dataset.state).toBe('streaming');
      expect(a?.querySelector('[data-testid=chat-message-text]')?.textContent?.trim()).toBe('Hello world');
    });
    // The user's text is shown as text, never as HTML.
    const user = screen.getAllByTestId('chat-message').filter((m) => m.dataset.role === 'user')[1];
    expect(user.querySelector('[data-testid=chat-message-text]')?.textContent?.trim()).toBe('hello <b>agent</b>');
    expect(user.querySelector('b')).toBeNull();

    // Cancel sends chat.cancel for our session and run.
    await fireEvent.click(testid('chat-cancel'));
    expect(ws.lastRequest('chat.cancel').params).toEqual({ profileId: 'main', sessionId: 's1', runId: 'r1', idempotencyKey: expect.any(String) });

    ws.serverEvent(
      'chat.final',
      {
        ...ev,
        message: {
          id: 'a1', profileId: 'main', sessionId: 's1', runId: 'r1', role: 'assistant', content: 'Hello world!', ts: Date.now() + 1,
          sources: [{ path: 'memory/a.md', startLine: 1, endLine: 4 }],
        },
      },
      5,
    );
    await waitFor(() => {
      const a = screen.getAllByTestId('chat-message').find((m) => m.dataset.role === 'assistant');
      expect(a?.dataset.state).toBe('final');
      expect(a?.querySelector('[data-testid=chat-message-text]')?.textContent?.trim()).toBe('Hello world!');
      expect(a?.textContent).toContain('memory/a.md:1-4');
    });
    expect(screen.queryByTestId('chat-cancel')).toBeNull();

    // Import: one good file, one not UTF-8 (rejected before sending).
    const good = new File(['# 会议纪要\nsqlite-vec'], '会议.md', { type: 'text/markdown' });
    const bad = new File([new Uint8Array([0xff, 0xfe, 0xfd])], 'bad.txt', { type: 'text/plain' });
    await fireEvent.drop(testid('memory-dropzone'), { dataTransfer: { files: [good, bad], types: ['Files'] } });
    await waitFor(() => expect(ws.lastRequest('memory.import')).toBeDefined());
    const imp = ws.lastRequest('memory.import');
    expect(imp.params).toMatchObject({ name: '会议.md', content: '# 会议纪要\nsqlite-vec', layer: 'role' });
    expect(typeof imp.params.idempotencyKey).toBe('string');
    expect(testid('import-progress').textContent).toMatch(/^[01] \/ 2$/);
    ws.reply(imp, { path: 'memory/会议.md', bytes: 24, chunks: 1 });
    await waitFor(() => expect(testid('import-progress').textContent).toBe('2 / 2'));
    const results = screen.getAllByTestId('import-result');
    // The refusal first (what needs the person's eye), then what was stored.
    expect(results.map((r) => r.dataset.status)).toEqual(['refused', 'ok']);
    expect(testid('import-summary').dataset).toMatchObject({ ok: '1', renamed: '0', refused: '1', error: '0' });
    expect(results[0].textContent).toContain('not UTF-8');
    expect(ws.sent.filter((f) => f.method === 'memory.import')).toHaveLength(1);

    // Search on Enter; snippets are text.
    const search = testid('memory-search-input') as HTMLInputElement;
    await fireEvent.input(search, { target: { value: '向量' } });
    await fireEvent.keyDown(search, { key: 'Enter' });
    await waitFor(() => expect(ws.lastRequest('memory.search')).toBeDefined());
    ws.reply(ws.lastRequest('memory.search'), {
      results: [{ path: 'memory/会议.md', startLine: 1, endLine: 2, score: 0.87654, snippet: '<img src=x onerror=alert(1)>\nline 2', layer: 'role', role: 'main' }],
    });
    await waitFor(() => expect(screen.getAllByTestId('memory-result')).toHaveLength(1));
    const r = screen.getAllByTestId('memory-result')[0];
    expect(r.querySelector('[data-testid=result-score]')?.textContent).toBe('0.88');
    expect(r.querySelector('[data-testid=result-path]')?.textContent).toBe('memory/会议.md');
    expect(r.querySelector('[data-testid=result-lines]')?.textContent).toBe('1-2');
    expect(r.querySelector('[data-testid=result-snippet]')?.textContent).toBe('<img src=x onerror=alert(1)>\nline 2');
    expect(r.querySelector('img')).toBeNull();

    // Clicking a result opens it in the viewer.
    await fireEvent.click(r);
    const get = ws.lastRequest('memory.get');
    expect(get.params).toEqual({ path: 'memory/会议.md' });
    ws.reply(get, { path: 'memory/会议.md', text: '# 会议纪要\nsqlite-vec\nmore' });
    await waitFor(() => expect(testid('memory-viewer').textContent).toContain('sqlite-vec'));

    // memory.changed refreshes the file list and status.
    const filesBefore = ws.sent.filter((f) => f.method === 'memory.files').length;
    ws.serverEvent('memory.changed', { paths: ['memory/会议.md'], reason: 'import' }, 6);
    await waitFor(() => expect(ws.sent.filter((f) => f.method === 'memory.files').length).toBeGreaterThan(filesBefore), { timeout: 2000 });
  });

  it('shows the disconnected state, disables buttons, and reloads history on reconnect without duplicates', async () => {
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    const history = { messages: [{ id: 'h1', role: 'user', content: 'q', ts: 1 }, { id: 'h2', role: 'assistant', content: 'a', ts: 2 }] };
    await waitFor(() => expect(ws.answerAll('history.profile', history, done)).toBe(1));
    await waitFor(() => expect(screen.getAllByTestId('chat-message')).toHaveLength(2));

    await fireEvent.input(testid('chat-input'), { target: { value: 'draft' } });
    expect((testid('chat-send') as HTMLButtonElement).disabled).toBe(false);
    ws.serverClose(1006, 'network down');
    await waitFor(() => expect(testid('conn-state').textContent).toBe('disconnected'));
    expect((testid('chat-send') as HTMLButtonElement).disabled).toBe(true);

    // The client reconnects on its own (first backoff step: 500 ms).
    await waitFor(() => expect(FakeWebSocket.instances.length).toBe(2), { timeout: 2000 });
    const ws2 = FakeWebSocket.last();
    ws2.handshake();
    await waitFor(() => expect(testid('conn-state').textContent).toBe('connected'));
    await waitFor(() => expect(ws2.answerAll('history.profile', history, done)).toBe(1));
    await new Promise((r) => setTimeout(r, 20));
    expect(screen.getAllByTestId('chat-message')).toHaveLength(2);
  });

  const bubbles = () =>
    screen.getAllByTestId('chat-message').map((m) => ({
      role: m.dataset.role,
      state: m.dataset.state,
      text: m.querySelector('[data-testid=chat-message-text]')?.textContent?.trim(),
    }));

  it('Cancel keeps the just-sent user message on screen', async () => {
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    const earlier = [
      { id: 'u0', profileId: 'main', sessionId: 's1', runId: 'r0', role: 'user', content: 'cancel me', ts: 1 },
      { id: 'a0', profileId: 'main', sessionId: 's1', runId: 'r0', role: 'assistant', content: 'par', ts: 2, error: 'cancelled' },
    ];
    await waitFor(() => expect(ws.answerAll('history.profile', { messages: earlier, active: [] }, done)).toBe(1));
    await waitFor(() => expect(screen.getAllByTestId('chat-message')).toHaveLength(2));

    await fireEvent.input(testid('chat-input'), { target: { value: 'cancel test two' } });
    await fireEvent.click(testid('chat-send'));
    await waitFor(() => expect(ws.lastRequest('chat.send')).toBeDefined());
    // As the server answers: messageId is the reply's id, userMessageId the user message's.
    ws.reply(ws.lastRequest('chat.send'), { runId: 'r2', messageId: 'a2', sessionId: 's1', userMessageId: 'u2' });
    await waitFor(() => expect(testid('chat-cancel')).toBeTruthy());
    const ev = { runId: 'r2', profileId: 'main', sessionId: 's1', messageId: 'a2' };
    ws.serverEvent('chat.thinking', ev, 2);
    ws.serverEvent('chat.chunk', { ...ev, seq: 1, delta: 'Once upon' }, 3);
    await waitFor(() => expect(bubbles()[3]).toMatchObject({ role: 'assistant', state: 'streaming', text: 'Once upon' }));

    await fireEvent.click(testid('chat-cancel'));
    expect(ws.lastRequest('chat.cancel').params).toEqual({ profileId: 'main', sessionId: 's1', runId: 'r2', idempotencyKey: expect.any(String) });
    ws.reply(ws.lastRequest('chat.cancel'), { cancelled: true });
    const partial = { id: 'a2', profileId: 'main', sessionId: 's1', runId: 'r2', role: 'assistant', content: 'Once upon', ts: Date.now() + 5, error: 'cancelled' };
    ws.serverEvent('chat.cancelled', { ...ev, message: partial }, 4);
    const want = [
      { role: 'user', state: 'final', text: 'cancel me' },
      { role: 'assistant', state: 'cancelled', text: 'par' },
      { role: 'user', state: 'final', text: 'cancel test two' },
      { role: 'assistant', state: 'cancelled', text: 'Once upon' },
    ];
    await waitFor(() => expect(bubbles()).toEqual(want));
    await waitFor(() => expect(screen.queryByTestId('chat-cancel')).toBeNull());
  });

  it('re-attaches to a run in progress after a reload, without losing its start, and can cancel it', async () => {
    localStorage.setItem('atrium.session.main', 's1');
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    const user = { id: 'u1', profileId: 'main', sessionId: 's1', runId: 'r1', role: 'user', content: 'tell me a story', ts: 1 };
    const ev = { runId: 'r1', profileId: 'main', sessionId: 's1', messageId: 'a1' };
    await waitFor(() => expect(ws.sent.some((f) => f.method === 'history.profile')).toBe(true));
    // A chunk that the snapshot already covers arrives before the history answer, one after it.
    ws.serverEvent('chat.chunk', { ...ev, seq: 2, delta: ' upon' }, 2);
    ws.answerAll('history.profile', { messages: [user], active: [{ ...ev, content: 'Once upon', seq: 2, startedAt: 1 }] }, done);
    ws.serverEvent('chat.chunk', { ...ev, seq: 3, delta: ' a time' }, 3);
    await waitFor(() =>
      expect(bubbles()).toEqual([
        { role: 'user', state: 'final', text: 'tell me a story' },
        { role: 'assistant', state: 'streaming', text: 'Once upon a time' },
      ]),
    );

    await fireEvent.click(testid('chat-cancel'));
    expect(ws.lastRequest('chat.cancel').params).toEqual({ profileId: 'main', sessionId: 's1', runId: 'r1', idempotencyKey: expect.any(String) });
  });

  it('another tab sees the question of a run it did not send, above the streaming answer', async () => {
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    await waitFor(() => expect(ws.answerAll('history.profile', { messages: [], active: [] }, done)).toBe(1));
    const ev = { runId: 'r1', profileId: 'main', sessionId: 'tab1', messageId: 'a1' };
    const question = { id: 'u1', profileId: 'main', sessionId: 'tab1', runId: 'r1', role: 'user', content: 'What is QK-7731?', ts: 1000 };
    ws.serverEvent('chat.thinking', { ...ev, userMessage: question }, 2);
    ws.serverEvent('chat.chunk', { ...ev, seq: 1, delta: 'The launch code' }, 3);
    await waitFor(() =>
      expect(bubbles()).toEqual([
        { role: 'user', state: 'final', text: 'What is QK-7731?' },
        { role: 'assistant', state: 'streaming', text: 'The launch code' },
      ]),
    );
    // Another session's run: this tab may still send, and has nothing to cancel.
    expect(screen.queryByTestId('chat-cancel')).toBeNull();
    await fireEvent.input(testid('chat-input'), { target: { value: 'mine' } });
    expect((testid('chat-send') as HTMLButtonElement).disabled).toBe(false);
  });

  it("while this session's run is active a message is queued, sent when the run ends; a refused send shows the message, not the code", async () => {
    localStorage.setItem('atrium.session.main', 's1');
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    await waitFor(() => expect(ws.answerAll('history.profile', { messages: [], active: [] }, done)).toBe(1));
    const ev = { runId: 'r1', profileId: 'main', sessionId: 's1', messageId: 'a1' };
    // Our session's run, started in another tab.
    ws.serverEvent('chat.thinking', { ...ev, userMessage: { id: 'u1', profileId: 'main', sessionId: 's1', runId: 'r1', role: 'user', content: 'first', ts: 1000 } }, 2);
    await waitFor(() => expect(testid('chat-cancel')).toBeTruthy());
    const input = testid('chat-input') as HTMLTextAreaElement;
    await fireEvent.input(input, { target: { value: 'second' } });
    expect((testid('chat-send') as HTMLButtonElement).disabled).toBe(false);
    expect(testid('chat-send').dataset.queues).toBe('true');
    expect(testid('chat-busy').textContent).toContain('Answering');
    await fireEvent.keyDown(input, { key: 'Enter' });
    await fireEvent.input(input, { target: { value: 'third' } });
    await fireEvent.click(testid('chat-send'));
    await fireEvent.input(input, { target: { value: 'dropped' } });
    await fireEvent.click(testid('chat-send'));
    expect(ws.sent.some((f) => f.method === 'chat.send')).toBe(false);
    expect(input.value).toBe('');
    const queued = () => screen.queryAllByTestId('chat-queued-text').map((e) => e.textContent);
    expect(queued()).toEqual(['second', 'third', 'dropped']);
    // Removable before it is sent.
    await fireEvent.click(screen.getAllByTestId('chat-queued-remove')[2]);
    expect(queued()).toEqual(['second', 'third']);

    ws.serverEvent('chat.final', { ...ev, message: { id: 'a1', profileId: 'main', sessionId: 's1', runId: 'r1', role: 'assistant', content: 'done', ts: 1001 } }, 3);
    // The oldest goes out on its own; the next waits for that run.
    await waitFor(() => expect(ws.sent.filter((f) => f.method === 'chat.send')).toHaveLength(1));
    expect(ws.lastRequest('chat.send').params.message).toBe('second');
    expect(queued()).toEqual(['third']);
    ws.reply(ws.lastRequest('chat.send'), { runId: 'r2', messageId: 'a2', sessionId: 's1', userMessageId: 'u2' });
    const ev2 = { runId: 'r2', profileId: 'main', sessionId: 's1', messageId: 'a2' };
    ws.serverEvent('chat.thinking', ev2, 4);
    await new Promise((r) => setTimeout(r, 20));
    expect(ws.sent.filter((f) => f.method === 'chat.send')).toHaveLength(1);
    ws.serverEvent('chat.final', { ...ev2, message: { id: 'a2', profileId: 'main', sessionId: 's1', runId: 'r2', role: 'assistant', content: 'ok', ts: Date.now() } }, 5);
    await waitFor(() => expect(ws.sent.filter((f) => f.method === 'chat.send')).toHaveLength(2));
    expect(ws.lastRequest('chat.send').params.message).toBe('third');
    expect(screen.queryByTestId('chat-queue')).toBeNull();
    // A run that started elsewhere in between: the server refuses (retryable CONFLICT).
    ws.fail(ws.lastRequest('chat.send'), 'CONFLICT', 'chat send: busy: session s1 is still answering the previous message', true);
    await waitFor(() => expect(bubbles().find((b) => b.text === 'third')).toMatchObject({ role: 'user', state: 'error' }));
    // The error is said beside the message, in words, never inside the person's own bubble.
    const msg = screen.getAllByTestId('chat-message').find((m) => m.textContent?.includes('third')) as HTMLElement;
    expect(msg.textContent?.trim()).toBe('third');
    const note = testid('chat-send-error');
    expect(note.textContent).toContain('main is still answering the previous message');
    expect(note.textContent).not.toContain('chat send');
    expect(note.title).toBe('CONFLICT: chat send: session s1 is still answering the previous message');
    // Retry sends it again, and the failed entry leaves the list.
    await fireEvent.click(testid('chat-retry'));
    await waitFor(() => expect(ws.sent.filter((f) => f.method === 'chat.send')).toHaveLength(3));
    expect(ws.lastRequest('chat.send').params.message).toBe('third');
    expect(screen.queryByTestId('chat-send-error')).toBeNull();
    expect(bubbles().filter((b) => b.text === 'third')).toHaveLength(1);
  });

  it('after a restart: keeps a vanished instance selected (a send starts it), drops a deleted one, errors in words', async () => {
    localStorage.setItem('atrium.profile.selected', 'code-expert-1');
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    // The app restarted: the role is listed, its instance is not running any more.
    await waitFor(() =>
      expect(ws.answerAll('profiles.list', { profiles: [{ id: 'main', name: 'Main' }], index: [{ id: 'code-expert', name: 'code-expert', path: 'memory/roles/code-expert/config.md' }], instances: [] }, done)).toBe(1),
    );
    const view = () => screen.getAllByTestId('chat-view').find((v) => !v.hidden) as HTMLElement;
    await waitFor(() => expect(view().dataset.profile).toBe('code-expert-1'));
    await waitFor(() => expect(within(view()).getByTestId('chat-not-running').textContent).toContain('starts when you send'));
    ws.answerAll('history.profile', { messages: [], active: [] }, done);
    await fireEvent.input(within(view()).getByTestId('chat-input'), { target: { value: 'are you there?' } });
    await fireEvent.click(within(view()).getByTestId('chat-send'));
    await waitFor(() => expect(ws.lastRequest('chat.send')?.params).toMatchObject({ profileId: 'code-expert-1', message: 'are you there?' }));
    // A refusal (a device may not start it; here as the gateway says it) shows as a notice, in words.
    ws.fail(ws.lastRequest('chat.send'), 'UNAVAILABLE', 'chat send: unavailable: instance code-expert-1 is not running; only the person at the desktop starts instances', true);
    await waitFor(() => expect(within(view()).getByTestId('chat-send-error').textContent).toContain('code-expert-1 cannot take messages right now'));
    const mine = within(view()).getAllByTestId('chat-message')[0];
    expect(mine.textContent?.trim()).toBe('are you there?');
    expect(within(view()).getByTestId('chat-send-error').textContent).not.toContain('unavailable:');

    // The role is deleted meanwhile: after the reconnect's profiles.list the selection goes back to main.
    ws.serverClose(1006, 'restart');
    await waitFor(() => expect(testid('conn-state').dataset.state).toBe('disconnected'));
    await waitFor(() => expect(FakeWebSocket.instances.length).toBe(2), { timeout: 2000 });
    const ws2 = FakeWebSocket.last();
    ws2.handshake();
    await waitFor(() => expect(ws2.answerAll('profiles.list', { profiles: [{ id: 'main', name: 'Main' }], index: [], instances: [] }, done)).toBe(1));
    await waitFor(() => expect(view().dataset.profile).toBe('main'));
    expect(localStorage.getItem('atrium.profile.selected')).toBe('main');
  });

  it('a run cut by a server restart shows as interrupted after the reconnect, never as final', async () => {
    localStorage.setItem('atrium.session.main', 's1');
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    await waitFor(() => expect(ws.answerAll('history.profile', { messages: [], active: [] }, done)).toBe(1));
    const q = (run: string, n: number) => ({ id: `u${n}`, profileId: 'main', sessionId: n === 1 ? 's1' : 's2', runId: run, role: 'user', content: `q${n}`, ts: 1000 + 2 * n });
    // r1 (ours) is stored as interrupted by the shutdown; r2 (another session) vanished without a trace (hard kill).
    for (const [run, n] of [['r1', 1], ['r2', 2]] as const) {
      const ev = { runId: run, profileId: 'main', sessionId: q(run, n).sessionId, messageId: `a${n}` };
      ws.serverEvent('chat.thinking', { ...ev, userMessage: q(run, n) }, 2 * n);
      ws.serverEvent('chat.chunk', { ...ev, seq: 1, delta: `partial ${n}` }, 2 * n + 1);
    }
    await waitFor(() => expect(bubbles().map((b) => b.state)).toEqual(['final', 'streaming', 'final', 'streaming']));
    expect((testid('chat-send') as HTMLButtonElement).disabled).toBe(true);

    ws.serverClose(1006, 'server gone');
    await waitFor(() => expect(FakeWebSocket.instances.length).toBe(2), { timeout: 2000 });
    const ws2 = FakeWebSocket.last();
    ws2.handshake();
    const stored = [q('r1', 1), { id: 'a1', profileId: 'main', sessionId: 's1', runId: 'r1', role: 'assistant', content: 'partial 1', ts: 1003, error: 'interrupted' }, q('r2', 2)];
    await waitFor(() => expect(ws2.answerAll('history.profile', { messages: stored, active: [] }, done)).toBe(1));
    await waitFor(() =>
      expect(bubbles()).toEqual([
        { role: 'user', state: 'final', text: 'q1' },
        { role: 'assistant', state: 'interrupted', text: 'partial 1' },
        { role: 'user', state: 'final', text: 'q2' },
        { role: 'assistant', state: 'interrupted', text: 'partial 2' },
      ]),
    );
    expect(screen.getAllByTestId('chat-message')[1].textContent).toContain('Interrupted');
    expect(screen.queryByTestId('chat-cancel')).toBeNull();
    await fireEvent.input(testid('chat-input'), { target: { value: 'again' } });
    expect((testid('chat-send') as HTMLButtonElement).disabled).toBe(false);
  });

  it('refreshes the file list during a long index (memory.progress), and shows import errors without codes', async () => {
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    await waitFor(() => expect(ws.answerAll('memory.files', { files: [] }, done)).toBe(1));
    const files = () => ws.sent.filter((f) => f.method === 'memory.files').length;
    // Progress events keep coming (no memory.changed until the end): the list still refreshes.
    let seq = 10;
    const tick = setInterval(() => ws.serverEvent('memory.progress', { done: seq, total: 2213 }, seq++), 100);
    try {
      await waitFor(() => expect(files()).toBeGreaterThan(1), { timeout: 3000 });
    } finally {
      clearInterval(tick);
    }
    ws.answerAll('memory.files', { files: [{ path: 'memory/a.md', size: 10, mtime: 1, chunks: 1, layer: 'role', role: 'main' }] }, done);
    await waitFor(() => expect(screen.getAllByTestId('memory-file')).toHaveLength(1));

    const empty = new File(['x'], 'empty.md', { type: 'text/markdown' });
    await fireEvent.drop(testid('memory-dropzone'), { dataTransfer: { files: [empty], types: ['Files'] } });
    await waitFor(() => expect(ws.lastRequest('memory.import')).toBeDefined());
    ws.fail(ws.lastRequest('memory.import'), 'INVALID_REQUEST', 'import empty.md: memory: invalid input: empty content');
    await waitFor(() => expect(screen.getAllByTestId('import-result')[0].dataset.status).toBe('error'));
    const row = screen.getAllByTestId('import-result')[0];
    expect(row.querySelector('.msg')?.textContent).toBe('empty content');
    expect(row.textContent).not.toContain('INVALID_REQUEST');
    expect(row.title).toBe('INVALID_REQUEST: import empty.md: memory: invalid input: empty content');
  });

  it('asks for a token when unauthorized and reconnects with it', async () => {
    const { ws } = setup();
    ws.serverOpen();
    ws.challenge();
    ws.fail(ws.connectFrame(), 'UNAUTHORIZED', 'invalid token');
    await waitFor(() => expect(testid('conn-state').textContent).toBe('unauthorized'));
    await fireEvent.input(testid('token-input'), { target: { value: ' new-token ' } });
    await fireEvent.click(testid('token-save'));
    expect(localStorage.getItem('atrium.token')).toBe('new-token');
    const ws2 = FakeWebSocket.last();
    expect(ws2).not.toBe(ws);
    ws2.serverOpen();
    ws2.challenge();
    expect(ws2.connectFrame().params.auth).toEqual({ token: 'new-token' });
    ws2.helloOk();
    await waitFor(() => expect(testid('conn-state').textContent).toBe('connected'));
    expect(screen.queryByTestId('token-input')).toBeNull();
  });

  it("the header's Menu and connection dot (one row at phone width): open, name, close", async () => {
    const { ws } = setup();
    ws.handshake();
    await waitFor(() => expect(testid('conn-state').textContent).toBe('connected'));
    // The dot says the connection in words to a screen reader, and, tapped, shows them.
    const dot = testid('conn-toggle');
    expect(dot.getAttribute('aria-label')).toBe('Connection: connected');
    expect(dot.getAttribute('aria-expanded')).toBe('false');
    await fireEvent.click(dot);
    expect(dot.getAttribute('aria-expanded')).toBe('true');
    expect(document.getElementById(dot.getAttribute('aria-controls')!)?.classList.contains('open')).toBe(true);
    expect(document.getElementById(dot.getAttribute('aria-controls')!)?.contains(testid('conn-state'))).toBe(true);
    // A tap outside the header closes it.
    await fireEvent.pointerDown(document.body);
    expect(dot.getAttribute('aria-expanded')).toBe('false');

    // The Menu holds the actions and the language; an action closes it, Escape closes it and gives
    // the focus back to Menu.
    const menu = testid('header-menu');
    const panel = document.getElementById(menu.getAttribute('aria-controls')!)!;
    for (const id of ['open-canvas', 'open-collab', 'open-nodes', 'open-settings', 'lang-select']) expect(panel.contains(testid(id))).toBe(true);
    await fireEvent.click(menu);
    expect(menu.getAttribute('aria-expanded')).toBe('true');
    await fireEvent.click(testid('open-settings'));
    expect(menu.getAttribute('aria-expanded')).toBe('false');
    expect(testid('settings-dialog')).toBeTruthy();
    await fireEvent.click(menu);
    await fireEvent.keyDown(window, { key: 'Escape' });
    expect(menu.getAttribute('aria-expanded')).toBe('false');
    expect(document.activeElement).toBe(menu);
    expect(testid('settings-dialog')).toBeTruthy(); // the first Escape closes only the menu

    // In Chinese.
    const lang = testid('lang-select') as HTMLSelectElement;
    await fireEvent.change(lang, { target: { value: 'zh' } });
    await waitFor(() => expect(dot.getAttribute('aria-label')).toBe('连接：已连接'));
    expect(menu.textContent).toContain('菜单');
    await fireEvent.change(lang, { target: { value: 'en' } });
  });

  it('has the hidden file input with the right accept list', () => {
    setup();
    const input = testid('memory-file-input') as HTMLInputElement;
    expect(input.type).toBe('file');
    expect(input.multiple).toBe(true);
    expect(input.accept).toBe('.md,.txt,text/markdown,text/plain');
  });

  it('sends its conversationId and recent history, deletes a message, and drops one deleted elsewhere', async () => {
    const { ws } = setup();
    ws.handshake();
    const done = new Set<string>();
    const earlier = [
      { id: 'u0', profileId: 'main', sessionId: 's1', runId: 'r0', role: 'user', content: 'first question', ts: 1 },
      { id: 'a0', profileId: 'main', sessionId: 's1', runId: 'r0', role: 'assistant', content: 'first answer', ts: 2 },
    ];
    await waitFor(() => expect(ws.answerAll('history.profile', { messages: earlier, active: [] }, done)).toBe(1));
    await waitFor(() => expect(screen.getAllByTestId('chat-message')).toHaveLength(2));

    await fireEvent.input(testid('chat-input'), { target: { value: 'second' } });
    await fireEvent.click(testid('chat-send'));
    await waitFor(() => expect(ws.lastRequest('chat.send')).toBeDefined());
    const conv = localStorage.getItem('atrium.conversation.main');
    expect(conv).toMatch(/^[0-9a-f-]{36}$/);
    expect(ws.lastRequest('chat.send').params).toMatchObject({
      conversationId: conv,
      message: 'second',
      history: [
        { id: 'u0', role: 'user', content: 'first question', ts: 1 },
        { id: 'a0', role: 'assistant', content: 'first answer', ts: 2 },
      ],
    });
    ws.reply(ws.lastRequest('chat.send'), { runId: 'r1', messageId: 'a1', sessionId: 's1', userMessageId: 'u1' });

    // Delete the first answer: message.delete, and it is gone here (and from the cache).
    const a0 = screen.getAllByTestId('chat-message').find((m) => m.dataset.messageId === 'a0')!;
    await fireEvent.click(a0.querySelector('[data-testid=chat-delete]')!);
    expect(ws.lastRequest('message.delete').params).toEqual({ messageId: 'a0', idempotencyKey: expect.any(String) });
    ws.reply(ws.lastRequest('message.delete'), { deleted: true });
    await waitFor(() => expect(bubbles().map((b) => b.text)).toEqual(['first question', 'second']));
    expect(localStorage.getItem('atrium.cache.main')).not.toContain('first answer');

    // Another tab deleted the question: the broadcast removes it here too.
    ws.serverEvent('message.deleted', { messageId: 'u0', profileId: 'main' }, 9);
    await waitFor(() => expect(bubbles().map((b) => b.text)).toEqual(['second']));

    // A refused delete shows the message, not the code.
    const u1 = screen.getAllByTestId('chat-message').find((m) => m.dataset.messageId === 'u1')!;
    await fireEvent.click(u1.querySelector('[data-testid=chat-delete]')!);
    ws.fail(ws.lastRequest('message.delete'), 'CONFLICT', 'chat delete message u1: busy: it belongs to run r1, still in progress', true);
    await waitFor(() => expect(screen.getByText(/Could not delete:/).textContent).not.toContain('CONFLICT'));
    expect(bubbles().map((b) => b.text)).toEqual(['second']);
  });
});
