// The workbench, the chat's run details and the permission prompt against a scripted gateway.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fireEvent, render, screen, waitFor, within } from '@testing-library/svelte';
import App from '../App.svelte';
import { GatewayClient } from '../lib/gateway';
import { FakeWebSocket } from '../lib/testing/fakeWebSocket';
import { resetLang, setLang } from '../lib/i18n.svelte';

function setup() {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
  render(App, { props: { gw } });
  gw.start();
  const ws = FakeWebSocket.last();
  ws.handshake();
  return { gw, ws };
}

const list = {
  profiles: [{ id: 'main', name: 'Main', model: 'offline', provider: 'offline' }],
  index: [{ id: 'writer', name: 'writer', path: 'memory/roles/writer/config.md' }],
  instances: [{ instanceId: 'writer-1', profileId: 'writer', state: 'ready', restarts: 0, ts: 10 }],
};
/** The app connected, with the profiles listed and an empty history. */
async function loaded() {
  const { ws } = setup();
  const done = new Set<string>();
  await waitFor(() => expect(ws.answerAll('profiles.list', list, done)).toBe(1));
  ws.answerAll('history.profile', { messages: [], active: [] }, done);
  return { ws, done };
}
const profileItem = (id: string) => screen.getAllByTestId('profile').find((e) => e.dataset.profile === id) as HTMLElement;
const view = (id: string) => screen.getAllByTestId('chat-view').find((e) => e.dataset.profile === id) as HTMLElement;
const ev = { runId: 'r1', profileId: 'main', sessionId: 'other', messageId: 'a1' };

beforeEach(() => {
  FakeWebSocket.reset();
  localStorage.clear();
});
afterEach(() => {
  localStorage.clear();
  resetLang();
});

describe('profiles workbench', () => {
  it('lists profiles with instances, spawns and stops, shows trouble, counts unread, keeps drafts', async () => {
    const { ws, done } = await loaded();
    await waitFor(() => expect(screen.getAllByTestId('profile')).toHaveLength(2));
    expect(profileItem('main').dataset.activity).toBe('idle');
    expect(within(profileItem('writer')).getByTestId('instance').dataset.state).toBe('ready');
    // main has no role config: nothing to spawn.
    expect(within(profileItem('main')).queryByTestId('profile-spawn')).toBeNull();

    await fireEvent.click(within(profileItem('writer')).getByTestId('profile-spawn'));
    const spawn = ws.lastRequest('profiles.spawn');
    expect(spawn.params).toEqual({ profileId: 'writer', idempotencyKey: expect.any(String) });
    ws.reply(spawn, { instance: { instanceId: 'writer-2', profileId: 'writer', state: 'starting', restarts: 0, ts: 11 } });
    await waitFor(() => expect(ws.answerAll('profiles.list', list, done)).toBe(1)); // refreshed after the spawn
    ws.serverEvent('profiles.instance', { instanceId: 'writer-2', profileId: 'writer', state: 'crashed', reason: 'exited: signal: killed', restarts: 0, ts: 12 }, 2);
    ws.serverEvent('profiles.instance', { instanceId: 'writer-2', profileId: 'writer', state: 'restarting', reason: 'exited: signal: killed; restart in 500ms', restarts: 1, ts: 13 }, 3);
    await waitFor(() => {
      const i2 = within(profileItem('writer')).getAllByTestId('instance').find((e) => e.dataset.instanceId === 'writer-2') as HTMLElement;
      expect(i2.dataset.state).toBe('restarting');
      expect(i2.textContent).toContain('restart in 500ms');
      expect(i2.textContent).toContain('↻ 1');
    });

    await fireEvent.click(within(profileItem('writer')).getAllByTestId('instance-stop')[0]);
    expect(ws.lastRequest('profiles.stop').params).toEqual({ instanceId: 'writer-1', idempotencyKey: expect.any(String) });
    ws.fail(ws.lastRequest('profiles.stop'), 'TIMEOUT', 'profiles.stop: context deadline exceeded', true);
    await waitFor(() => expect(screen.getByTestId('profile-error').textContent).toContain('Could not stop writer-1'));

    // A draft in main survives a switch to writer and back.
    await fireEvent.input(within(view('main')).getByTestId('chat-input'), { target: { value: '半句话 half a thought' } });
    await fireEvent.click(within(profileItem('writer')).getByTestId('profile-open'));
    await waitFor(() => expect(view('writer').hidden).toBe(false));
    expect(view('main').hidden).toBe(true);
    expect(within(view('writer')).getByTestId('chat-unavailable')).toBeTruthy();

    // main answers while writer is in view: unread.
    ws.serverEvent('chat.thinking', ev, 4);
    await waitFor(() => expect(profileItem('main').dataset.activity).toBe('streaming'));
    ws.serverEvent('chat.final', { ...ev, message: { id: 'a1', profileId: 'main', sessionId: 'other', runId: 'r1', role: 'assistant', content: 'hi', ts: 5 } }, 5);
    await waitFor(() => expect(within(profileItem('main')).getByTestId('profile-unread').textContent).toBe('1'));
    expect(document.title).toBe('(1) Atrium');

    await fireEvent.click(within(profileItem('main')).getByTestId('profile-open'));
    await waitFor(() => expect(within(profileItem('main')).queryByTestId('profile-unread')).toBeNull());
    expect((within(view('main')).getByTestId('chat-input') as HTMLTextAreaElement).value).toBe('半句话 half a thought');
    expect(localStorage.getItem('atrium.draft.main')).toBe('半句话 half a thought');
    expect(document.title).toBe('Atrium');
  });

  it('an instance opens its own chat (its id is the profileId) and counts its unread answers', async () => {
    const { ws, done } = await loaded();
    await waitFor(() => expect(screen.getAllByTestId('instance')).toHaveLength(1));
    const w1 = { runId: 'rw', profileId: 'writer-1', sessionId: 'x', messageId: 'aw' };
    ws.serverEvent('chat.final', { ...w1, message: { id: 'aw', profileId: 'writer-1', sessionId: 'x', runId: 'rw', role: 'assistant', content: '写好了', ts: 3 } }, 2);
    await waitFor(() => expect(screen.getByTestId('instance-unread').textContent).toBe('1'));

    await fireEvent.click(screen.getByTestId('instance-open'));
    await waitFor(() => expect(view('writer-1').hidden).toBe(false));
    expect(screen.queryByTestId('instance-unread')).toBeNull();
    await waitFor(() => expect(ws.sent.some((f) => f.method === 'history.profile' && f.params.profileId === 'writer-1')).toBe(true));
    expect(view('writer-1').textContent).toContain('instance of writer');
    await fireEvent.input(within(view('writer-1')).getByTestId('chat-input'), { target: { value: 'draft a haiku' } });
    await fireEvent.click(within(view('writer-1')).getByTestId('chat-send'));
    await waitFor(() => expect(ws.lastRequest('chat.send')?.params).toMatchObject({ profileId: 'writer-1', message: 'draft a haiku' }));
  });

  it('folds reasoning per answer, lists tool calls and shows the agent state while the run is active', async () => {
    const { ws } = setup();
    const done = new Set<string>();
    await waitFor(() => expect(ws.answerAll('history.profile', { messages: [], active: [] }, done)).toBe(1));
    ws.serverEvent('chat.thinking', { ...ev, userMessage: { id: 'u1', profileId: 'main', sessionId: 'other', runId: 'r1', role: 'user', content: 'q', ts: 100 } }, 2);
    ws.serverEvent('agent.state', { ...ev, from: 'idle', to: 'analyzing', at: 1, source: 'loop' }, 3);
    ws.serverEvent('chat.reasoning', { ...ev, delta: 'I should search ' }, 4);
    ws.serverEvent('chat.reasoning', { ...ev, delta: '记忆.' }, 5);
    ws.serverEvent('agent.state', { ...ev, from: 'planning', to: 'acting', at: 3, source: 'loop' }, 6);
    ws.serverEvent('chat.tool', { ...ev, callId: 'c1', tool: 'memory_search', phase: 'call', argsSummary: 'query=QK-7731' }, 7);
    await waitFor(() => expect(screen.getByTestId('agent-state').textContent).toBe('Running a tool: memory_search'));
    const details = screen.getByTestId('chat-reasoning') as HTMLDetailsElement;
    expect(details.open).toBe(false);
    expect(details.textContent).toContain('I should search 记忆.');
    expect(screen.getByTestId('chat-tool').dataset.status).toBe('running');

    ws.serverEvent('chat.tool', { ...ev, callId: 'c1', tool: 'memory_search', phase: 'result', status: 'ok', summary: '2 results' }, 8);
    ws.serverEvent('chat.chunk', { ...ev, seq: 1, delta: 'Answer' }, 9);
    ws.serverEvent('chat.final', { ...ev, message: { id: 'a1', profileId: 'main', sessionId: 'other', runId: 'r1', role: 'assistant', content: 'Answer', ts: 101 } }, 10);
    await waitFor(() => expect(screen.queryByTestId('agent-state')).toBeNull());
    expect(screen.getByTestId('chat-tool').textContent).toContain('2 results');
    const folded = screen.getByTestId('chat-reasoning') as HTMLDetailsElement;
    (folded.querySelector('summary') as HTMLElement).click();
    expect(folded.open).toBe(true);
  });
});

describe('permission prompt', () => {
  const req = (id: string, expires = Date.now() + 120_000) => ({
    id, kind: 'level', runId: 'r1', profileId: 'main', sessionId: 's', messageId: 'a1', tool: 'exec', callId: 'c1',
    level: 'L2', argsSummary: 'go test ./...', reason: 'run programs', at: Date.now(), expires,
  });

  it('shows the open questions on connect, answers, and closes on answered elsewhere or expiry', async () => {
    const { ws } = setup();
    const done = new Set<string>();
    await waitFor(() => expect(ws.answerAll('profiles.list', list, done)).toBe(1));
    await waitFor(() => expect(ws.answerAll('agent.permissions', { requests: [req('p1')] }, done)).toBe(1));
    const prompt = await screen.findByTestId('permission-prompt');
    expect(prompt.dataset.permissionId).toBe('p1');
    expect(screen.getByTestId('permission-profile').textContent).toBe('Main');
    expect(screen.getByTestId('permission-tool').textContent).toBe('exec');
    expect(screen.getByTestId('permission-level').textContent).toContain('run programs');
    expect(screen.getByTestId('permission-args').textContent).toBe('go test ./...');
    expect(screen.getByTestId('permission-countdown').textContent).toMatch(/Expires in [12]:\d\d/);
    await waitFor(() => expect(profileItem('main').dataset.activity).toBe('waiting'));

    await fireEvent.click(screen.getByTestId('permission-allow'));
    expect(ws.lastRequest('agent.permission.answer').params).toEqual({ id: 'p1', allow: true, idempotencyKey: expect.any(String) });
    ws.reply(ws.lastRequest('agent.permission.answer'), { id: 'p1', allowed: true });
    await waitFor(() => expect(screen.queryByTestId('permission-prompt')).toBeNull());
    ws.serverEvent('agent.permission.answered', { id: 'p1', allowed: true, by: 'person' }, 2);
    await waitFor(() => expect(profileItem('main').dataset.activity).toBe('streaming'));

    // Asked, then answered on another device.
    ws.serverEvent('agent.permission', { ...req('p2'), level: 'L3', tool: 'web_fetch' }, 3);
    await waitFor(() => expect(screen.getByTestId('permission-level').textContent).toContain('network'));
    ws.serverEvent('agent.permission.answered', { id: 'p2', allowed: false, by: 'person' }, 4);
    await waitFor(() => expect(screen.queryByTestId('permission-prompt')).toBeNull());

    // Deny, refused as already answered (NOT_FOUND): the prompt closes.
    ws.serverEvent('agent.permission', req('p3'), 5);
    await screen.findByTestId('permission-prompt');
    await fireEvent.click(screen.getByTestId('permission-deny'));
    expect(ws.lastRequest('agent.permission.answer').params).toEqual({ id: 'p3', allow: false, idempotencyKey: expect.any(String) });
    ws.fail(ws.lastRequest('agent.permission.answer'), 'NOT_FOUND', 'permission p3 is not open');
    await waitFor(() => expect(screen.queryByTestId('permission-prompt')).toBeNull());

    // Expiry.
    ws.serverEvent('agent.permission', req('p4', Date.now() + 700), 6);
    await screen.findByTestId('permission-prompt');
    await waitFor(() => expect(screen.queryByTestId('permission-prompt')).toBeNull(), { timeout: 3000 });
  });

  it("says a camera question in the person's language by its reason code, else the server's sentence (issue 24 item 8)", async () => {
    setLang('zh');
    const { ws } = setup();
    const done = new Set<string>();
    await waitFor(() => expect(ws.answerAll('profiles.list', list, done)).toBe(1));
    const camera = {
      ...req('c1'), kind: 'node', tool: 'camera_snap', level: 'L3', argsSummary: 'phone (n1) camera.snap {"facing":"back"}',
      reason: 'run camera.snap on phone (n1) (back camera)?', reasonCode: 'node-run', reasonParams: { command: 'camera.snap', node: 'phone (n1)', facing: 'back' },
    };
    await waitFor(() => expect(ws.answerAll('agent.permissions', { requests: [camera] }, done)).toBe(1));
    await screen.findByTestId('permission-prompt');
    expect(screen.getByTestId('permission-reason').textContent).toBe('在 phone (n1) 上运行 camera.snap（后置摄像头）？');
    expect(screen.getByTestId('permission-level').textContent).toBe('L3 网络访问');
    expect(screen.getByTestId('permission-prompt').textContent).not.toMatch(/back camera|\brun\b/);
    // A code this UI does not know (a newer gateway's) shows the English sentence as sent.
    ws.serverEvent('agent.permission.answered', { id: 'c1', allowed: false, by: 'person' }, 2);
    ws.serverEvent('agent.permission', { ...camera, id: 'c2', reasonCode: 'node-run-v9' }, 3);
    await waitFor(() => expect(screen.getByTestId('permission-reason').textContent).toBe('run camera.snap on phone (n1) (back camera)?'));
  });

  it('a gateway without the agent loop methods is no error', async () => {
    const { ws } = setup();
    await waitFor(() => expect(ws.lastRequest('agent.permissions')).toBeDefined());
    ws.fail(ws.lastRequest('agent.permissions'), 'NOT_FOUND', 'unknown method "agent.permissions"');
    await waitFor(() => expect(screen.getByTestId('permission-support').textContent).toContain('unavailable'));
    expect(screen.queryByTestId('permission-prompt')).toBeNull();
  });
});
