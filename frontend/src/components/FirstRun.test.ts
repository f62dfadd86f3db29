// The first start (issue 17): the window asks where memory lives while the gateway says no
// workspace is chosen, offers the OpenClaw workspace it found with what is in it, sends the
// choice, and shows the panels once the app reopened on it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import App from '../App.svelte';
import { GatewayClient } from '../lib/gateway';
import { FakeWebSocket } from '../lib/testing/fakeWebSocket';
import { resetLang, setLang } from '../lib/i18n.svelte';
import { chooseParams, contentsText, firstChoice, shortPath, type SetupStatus } from '../lib/setup';

const status: SetupStatus = {
  chosen: false,
  home: '/home/li',
  stateDir: '/home/li/.atrium',
  picker: false,
  options: [
    { kind: 'new', path: '/home/li/Atrium', exists: false },
    {
      kind: 'openclaw',
      path: '/home/li/.openclaw/workspace',
      exists: true,
      notes: 3,
      daily: 2,
      memoryFile: true,
      context: ['SOUL.md', 'USER.md'],
      sample: ['MEMORY.md', 'memory/2026-11-28.md'],
      bytes: 300,
    },
  ],
};

function start() {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5, backoff: { initialMs: 1, maxMs: 2 } });
  render(App, { props: { gw } });
  gw.start();
  const ws = FakeWebSocket.last();
  ws.handshake();
  return { gw, ws };
}

beforeEach(() => {
  FakeWebSocket.reset();
  localStorage.clear();
});
afterEach(() => {
  resetLang();
  localStorage.clear();
});

describe('first start', () => {
  it('offers the OpenClaw workspace with its notes, sends the choice, and shows the panels after the app reopened', async () => {
    const { ws } = start();
    await waitFor(() => expect(ws.lastRequest('setup.status')).toBeDefined());
    ws.reply(ws.lastRequest('setup.status'), status);
    await waitFor(() => expect(screen.getByTestId('firstrun')).toBeTruthy());
    expect(screen.queryByTestId('open-settings')).toBeNull();
    expect(screen.queryByTestId('chat-input')).toBeNull();
    const choices = screen.getAllByTestId('setup-choice');
    expect(choices.map((c) => c.dataset.kind)).toEqual(['openclaw', 'new', 'other']);
    expect((choices[0].querySelector('input') as HTMLInputElement).checked).toBe(true);
    expect(choices[0].textContent).toContain('~/.openclaw/workspace');
    expect(choices[0].querySelector('[data-testid=setup-contents]')!.textContent).toBe('3 notes (2 daily logs) · MEMORY.md · SOUL.md, USER.md');
    expect(choices[1].textContent).toContain('~/Atrium');
    expect(screen.queryByTestId('setup-browse')).toBeNull(); // no window: no folder dialog

    await fireEvent.click(screen.getByTestId('setup-use'));
    await waitFor(() => expect(ws.lastRequest('setup.choose')).toBeDefined());
    const choose = ws.lastRequest('setup.choose');
    expect(choose.params).toMatchObject({ path: '/home/li/.openclaw/workspace', create: true });
    expect(typeof choose.params.idempotencyKey).toBe('string');
    ws.reply(choose, { workspace: '/home/li/.openclaw/workspace', created: false, restarting: true });
    await waitFor(() => expect(screen.getByTestId('setup-opening').textContent).toContain('~/.openclaw/workspace'));

    // The app reopens: the connection closes and comes back; now the workspace is chosen.
    ws.serverClose(1001, 'server shutting down');
    await waitFor(() => expect(FakeWebSocket.instances.length).toBe(2));
    const ws2 = FakeWebSocket.last();
    ws2.handshake();
    await waitFor(() => expect(ws2.lastRequest('setup.status')).toBeDefined());
    ws2.reply(ws2.lastRequest('setup.status'), { ...status, chosen: true, workspace: '/home/li/.openclaw/workspace', source: 'config' });
    await waitFor(() => expect(screen.queryByTestId('firstrun')).toBeNull());
    expect(screen.getByTestId('open-settings')).toBeTruthy();
  });

  it('shows a refusal, types another folder, and speaks Chinese', async () => {
    setLang('zh');
    const { ws } = start();
    await waitFor(() => expect(ws.lastRequest('setup.status')).toBeDefined());
    ws.reply(ws.lastRequest('setup.status'), { ...status, options: [status.options[0]], picker: true });
    await waitFor(() => expect(screen.getByTestId('firstrun')).toBeTruthy());
    expect(screen.getByTestId('firstrun').textContent).toContain('Atrium 的记忆放在哪里？');
    expect(screen.getByTestId('setup-browse').textContent).toBe('选择…');
    const choices = screen.getAllByTestId('setup-choice');
    expect(choices.map((c) => c.dataset.kind)).toEqual(['new', 'other']);
    expect(choices[0].querySelector('[data-testid=setup-contents]')!.textContent).toBe('新的空文件夹（现在创建）');

    // "Another folder" with nothing typed: said, nothing sent.
    await fireEvent.click(choices[1].querySelector('input')!);
    await fireEvent.click(screen.getByTestId('setup-use'));
    expect(screen.getByTestId('setup-error').textContent).toBe('请先输入文件夹路径。');
    expect(ws.lastRequest('setup.choose')).toBeUndefined();

    await fireEvent.input(screen.getByTestId('setup-path'), { target: { value: '  notes  ' } });
    await fireEvent.click(screen.getByTestId('setup-use'));
    await waitFor(() => expect(ws.lastRequest('setup.choose')).toBeDefined());
    expect(ws.lastRequest('setup.choose').params).toMatchObject({ path: 'notes', create: true });
    ws.fail(ws.lastRequest('setup.choose'), 'INVALID_REQUEST', 'invalid workspace: "notes" is not a full path (start it with / or ~/)');
    await waitFor(() => expect(screen.getByTestId('setup-error').textContent).toContain('is not a full path'));
    expect(screen.getByTestId('setup-error').textContent).toContain('无法使用该文件夹');
    expect(screen.getByTestId('firstrun')).toBeTruthy();
  });

  it('keeps the panels when the gateway has no setup.status (an older app)', async () => {
    const { ws } = start();
    await waitFor(() => expect(ws.lastRequest('setup.status')).toBeDefined());
    ws.fail(ws.lastRequest('setup.status'), 'NOT_FOUND', 'unknown method setup.status');
    await waitFor(() => expect(screen.getByTestId('open-settings')).toBeTruthy());
    expect(screen.queryByTestId('firstrun')).toBeNull();
    // Ctrl+, opens Settings, Escape closes them.
    await fireEvent.keyDown(window, { key: ',', ctrlKey: true });
    await waitFor(() => expect(screen.getByTestId('settings-dialog')).toBeTruthy());
    await fireEvent.keyDown(window, { key: 'Escape' });
    await waitFor(() => expect(screen.queryByTestId('settings-dialog')).toBeNull());
  });
});

describe('setup words', () => {
  it('shortens paths in the home folder, describes folders, builds the choice', () => {
    expect(shortPath('/home/li/Atrium', '/home/li')).toBe('~/Atrium');
    expect(shortPath('/home/lisa/Atrium', '/home/li')).toBe('/home/lisa/Atrium');
    expect(contentsText({ kind: 'new', path: '/x', exists: true, notes: 0 })).toBe('Exists, no notes yet');
    expect(contentsText({ kind: 'new', path: '/x', exists: true, notes: 1, partial: true })).toBe('1 note (a large folder: counted in part)');
    expect(firstChoice(status)).toBe('openclaw');
    expect(firstChoice({ ...status, options: [status.options[0]] })).toBe('new');
    expect(chooseParams('new', status, '')).toEqual({ path: '/home/li/Atrium', create: true });
    expect(chooseParams('other', status, '  ')).toBeNull();
    setLang('zh');
    expect(contentsText(status.options[1])).toBe('3 篇笔记（其中 2 篇每日日志） · MEMORY.md · SOUL.md, USER.md');
  });
});
