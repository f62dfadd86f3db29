// The desktop's pairing UI against a scripted gateway: a request shows a banner at once, the
// Nodes panel approves it with the commands left ticked, the QR code and words of device.pair.code.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import App from '../App.svelte';
import { GatewayClient } from '../lib/gateway';
import { FakeWebSocket } from '../lib/testing/fakeWebSocket';
import { resetLang, setLang } from '../lib/i18n.svelte';

beforeEach(() => {
  FakeWebSocket.reset();
  localStorage.clear();
  resetLang();
});

/** The App on a scripted gateway, connected; returns the gateway's socket. */
async function connectedApp(): Promise<FakeWebSocket> {
  const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
  render(App, { props: { gw } });
  gw.start();
  const ws = FakeWebSocket.last();
  ws.handshake();
  await waitFor(() => expect(screen.getByTestId('conn-state').textContent).toBe('connected'));
  return ws;
}

describe('Nodes', () => {
  it('banner on a pairing request, approve with a command unticked, pair code shown', async () => {
    const ws = await connectedApp();
    expect(screen.queryByTestId('pair-banner')).toBeNull();

    ws.serverEvent('device.pair.requested', {
      request: { requestId: 'r1', deviceId: 'd'.repeat(64), displayName: 'Android · Chrome', platform: 'Linux armv8l', roles: ['operator', 'node'], commands: ['location.get', 'system.notify'], remoteIp: '127.0.0.2', createdAt: Date.now() },
    });
    await waitFor(() => expect(screen.getByTestId('pair-banner').textContent).toContain('Android · Chrome asks to pair'));
    await fireEvent.click(screen.getByTestId('pair-banner-open'));
    const boxes = (await screen.findAllByTestId('request-command')) as HTMLInputElement[];
    expect(boxes.map((b) => [b.value, b.checked])).toEqual([
      ['location.get', true],
      ['system.notify', true],
    ]);
    await fireEvent.click(boxes[1]); // untick system.notify
    await fireEvent.click(screen.getByTestId('request-approve'));
    await waitFor(() => expect(ws.lastRequest('device.pair.approve')).toBeDefined());
    // What it may read was left alone: the safe default.
    expect(ws.lastRequest('device.pair.approve').params).toMatchObject({ requestId: 'r1', roles: ['operator', 'node'], commands: ['location.get'], scope: 'authenticated' });
    ws.reply(ws.lastRequest('device.pair.approve'), { device: {} });
    await waitFor(() => expect(screen.queryByTestId('pair-banner')).toBeNull());

    await fireEvent.click(screen.getByTestId('pair-start'));
    await waitFor(() => expect(ws.lastRequest('device.pair.code')).toBeDefined());
    ws.reply(ws.lastRequest('device.pair.code'), {
      code: 'ABCD2345',
      display: 'ABCD-2345',
      expiresAt: Date.now() + 600_000,
      url: 'https://127.0.0.2:4000/pair#c=ABCD2345&g=x&f=y',
      urls: ['https://127.0.0.2:4000/pair#c=ABCD2345&g=x&f=y'],
      qrPng: 'iVBORw0KGgo=',
      fingerprintWords: 'lusab babad gutih tugad',
      fingerprint: 'f'.repeat(64),
    });
    await waitFor(() => expect(screen.getByTestId('pair-code').textContent).toBe('ABCD-2345'));
    expect(screen.getByTestId('pair-words').textContent).toBe('lusab babad gutih tugad');
    expect((screen.getByTestId('pair-qr') as HTMLImageElement).src).toBe('data:image/png;base64,iVBORw0KGgo=');
    expect(screen.getByTestId('pair-expiry').textContent).toMatch(/expires in (9|10):\d\d/);
  });

  it('the pair code\'s certificate details: SHA-256 and SPKI hash with copy buttons (zh)', async () => {
    const writeText = vi.fn(async (_: string) => {});
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    const ws = await connectedApp();
    setLang('zh');
    ws.serverEvent('device.pair.requested', { request: { requestId: 'r1', deviceId: 'd'.repeat(64), displayName: 'phone', roles: ['node'], commands: [] } });
    await fireEvent.click(await screen.findByTestId('pair-banner-open'));
    await fireEvent.click(screen.getByTestId('pair-start'));
    await waitFor(() => expect(ws.lastRequest('device.pair.code')).toBeDefined());
    const spki = 'JHnwE0X/JtOmc1rRdN3Uw2MNwjt7LxMMM8xEhgm4cKE=';
    ws.reply(ws.lastRequest('device.pair.code'), {
      code: 'ABCD2345',
      display: 'ABCD-2345',
      expiresAt: Date.now() + 600_000,
      url: 'https://127.0.0.2:4000/pair#c=ABCD2345&g=x&f=y',
      fingerprintWords: 'lusab babad gutih tugad',
      fingerprint: 'f'.repeat(64),
      spki,
    });
    const details = await screen.findByTestId('pair-cert');
    expect(details.textContent).toContain('证书详情');
    expect(screen.getByTestId('pair-fingerprint').textContent).toBe('f'.repeat(64));
    expect(screen.getByTestId('pair-spki').textContent).toBe(spki);
    await fireEvent.click(screen.getByTestId('pair-copy-spki'));
    await waitFor(() => expect(screen.getByTestId('pair-copy-spki').textContent).toBe('已复制'));
    expect(writeText).toHaveBeenCalledWith(spki);
    await fireEvent.click(screen.getByTestId('pair-copy-fingerprint'));
    await waitFor(() => expect(writeText).toHaveBeenLastCalledWith('f'.repeat(64)));
  });

  it('a code locked after wrong tries on the network says so and offers a new one', async () => {
    const ws = await connectedApp();
    await fireEvent.click(await screen.findByTestId('open-nodes'));
    await fireEvent.click(screen.getByTestId('pair-start'));
    await waitFor(() => expect(ws.lastRequest('device.pair.code')).toBeDefined());
    const code = (c: string, id: string) => ({ code: c, display: `${c.slice(0, 4)}-${c.slice(4)}`, codeId: id, maxWrongTries: 10, expiresAt: Date.now() + 600_000, url: 'https://x/pair', urls: ['https://x/pair'], qrPng: 'iVBORw0KGgo=', fingerprintWords: 'w', fingerprint: 'f'.repeat(64) });
    const first = ws.lastRequest('device.pair.code');
    ws.reply(first, code('ABCD2345', 'c1'));
    await waitFor(() => expect(screen.getByTestId('pair-code').textContent).toBe('ABCD-2345'));
    expect(screen.getByTestId('pair-lock-note').textContent).toContain('10 wrong codes');
    ws.serverEvent('device.pair.code.locked', { codeId: 'other', wrongTries: 10 }); // another code (the CLI's): nothing changes
    ws.serverEvent('device.pair.code.locked', { codeId: 'c1', wrongTries: 10 });
    await waitFor(() => expect(screen.getByTestId('pair-locked').textContent).toContain('ABCD-2345 was locked after 10 wrong tries'));
    expect(screen.queryByTestId('pair-qr')).toBeNull();
    await fireEvent.click(screen.getByTestId('pair-new'));
    await waitFor(() => expect(ws.lastRequest('device.pair.code').id).not.toBe(first.id));
    ws.reply(ws.lastRequest('device.pair.code'), code('WXYZ6789', 'c2'));
    await waitFor(() => expect(screen.getByTestId('pair-code').textContent).toBe('WXYZ-6789'));
    expect(screen.queryByTestId('pair-locked')).toBeNull();
  });

  it('an exec ask from `atrium node` is a prompt over whatever panel is open (issue 24: it sat at the top of Nodes, out of view): allow once / always / deny through exec.ask.answer', async () => {
    const ws = await connectedApp();
    // The person is on the chat, not on Nodes.
    expect(screen.queryByTestId('nodes-panel')).toBeNull();
    ws.serverEvent('exec.ask.requested', { id: 'x1', nodeId: 'n1', displayName: 'build-box', command: ['make', 'test'], cwd: '/src', at: 1, expiresAt: 2 });
    ws.serverEvent('exec.ask.requested', { id: 'x2', nodeId: 'n1', displayName: 'build-box', command: ['rm', '-rf', 'out'], cwd: '/src' });
    const prompt = await screen.findByRole('alertdialog', { name: 'Commands waiting for you' });
    expect(prompt.dataset.askId).toBe('x1');
    expect(prompt.querySelector('pre')?.textContent).toBe('make test');
    expect(prompt.textContent).toContain('+1 more');
    expect(screen.queryByTestId('pair-banner')).toBeNull();
    await fireEvent.click(screen.getByTestId('exec-allow-always'));
    await waitFor(() => expect(ws.lastRequest('exec.ask.answer')?.params).toMatchObject({ id: 'x1', decision: 'allow-always' }));
    ws.reply(ws.lastRequest('exec.ask.answer'), { id: 'x1', decision: 'allow-always' });
    await waitFor(() => expect(screen.getByTestId('exec-ask').dataset.askId).toBe('x2'));
    expect(screen.getByTestId('exec-ask').querySelector('pre')?.textContent).toBe('rm -rf out');
    // Answered elsewhere (another window, or timed out): it goes here too.
    ws.serverEvent('exec.ask.resolved', { id: 'x2', decision: 'deny', by: 'timeout' });
    await waitFor(() => expect(screen.queryByTestId('exec-ask')).toBeNull());
  });

  it('pair a phone on a loopback-only gateway says plainly a phone cannot reach it and offers the LAN (en, zh; issue 24)', async () => {
    const ws = await connectedApp();
    await fireEvent.click(screen.getByTestId('open-nodes'));
    await fireEvent.click(await screen.findByTestId('pair-start'));
    await waitFor(() => expect(ws.lastRequest('device.pair.code')).toBeDefined());
    ws.reply(ws.lastRequest('device.pair.code'), {
      code: 'ABCD2345', display: 'ABCD-2345', expiresAt: Date.now() + 600_000,
      url: 'http://127.0.0.1:18789/pair#c=ABCD2345&g=x', urls: ['http://127.0.0.1:18789/pair#c=ABCD2345&g=x'],
      qrPng: 'iVBORw0KGgo=', loopbackOnly: true, note: 'the gateway listens on loopback only; a phone cannot reach it',
    });
    await waitFor(() => expect(screen.getByTestId('pair-loopback').textContent).toContain('a phone cannot reach it'));
    expect(screen.queryByTestId('pair-qr')).toBeNull(); // no QR code a phone would scan in vain
    expect(screen.queryByTestId('pair-words')).toBeNull(); // no empty words line
    setLang('zh');
    await waitFor(() => expect(screen.getByTestId('pair-loopback').textContent).toContain('手机无法连接'));
    await fireEvent.click(screen.getByTestId('pair-switch-lan'));
    await waitFor(() => expect(ws.lastRequest('config.patch')).toBeDefined());
    expect(ws.lastRequest('config.patch').params.patch).toEqual({ gateway: { bind: 'lan' } });
    ws.reply(ws.lastRequest('config.patch'), { restartRequired: ['gateway'] });
    await waitFor(() => expect(screen.getByTestId('pair-lan-saved').textContent).toContain('下次启动 Atrium 后'));
  });

  it('what a device may read: shared notes by default, a role, or everything only when ticked (with a warning); shown and changed in the device list', async () => {
    const ws = await connectedApp();
    ws.serverEvent('device.pair.requested', {
      request: { requestId: 'r1', deviceId: 'd'.repeat(64), displayName: 'Pixel', platform: 'Android', roles: ['operator'], commands: [], remoteIp: '127.0.0.2', createdAt: Date.now() },
    });
    await fireEvent.click(await screen.findByTestId('pair-banner-open'));
    await waitFor(() => expect(ws.lastRequest('roles.list')).toBeDefined());
    ws.reply(ws.lastRequest('roles.list'), { roles: [{ role: 'writer' }, { role: 'analyst' }] });
    const select = (await screen.findByTestId('scope-select')) as HTMLSelectElement;
    await waitFor(() => expect([...select.options].map((o) => o.value)).toEqual(['authenticated', 'role:main', 'role:writer', 'role:analyst']));
    expect(select.value).toBe('authenticated');
    expect([...select.options].map((o) => o.textContent)).toEqual(['Shared notes only (authenticated)', 'As role main', 'As role writer', 'As role analyst']);
    expect(screen.queryByTestId('scope-warning')).toBeNull();

    // Everything needs the box ticked, and says what it means; the select then does not count.
    await fireEvent.change(select, { target: { value: 'role:writer' } });
    const everything = screen.getByTestId('scope-everything') as HTMLInputElement;
    expect(everything.checked).toBe(false);
    await fireEvent.click(everything);
    expect(screen.getByTestId('scope-warning').textContent).toContain('If it is lost');
    expect(select.disabled).toBe(true);
    await fireEvent.click(everything); // changed their mind
    expect(screen.queryByTestId('scope-warning')).toBeNull();
    await fireEvent.click(screen.getByTestId('request-approve'));
    await waitFor(() => expect(ws.lastRequest('device.pair.approve')).toBeDefined());
    expect(ws.lastRequest('device.pair.approve').params).toMatchObject({ requestId: 'r1', scope: 'role:writer' });
    ws.reply(ws.lastRequest('device.pair.approve'), { device: {} });

    // The device list shows each device's scope; changing it asks device.scope.set.
    await waitFor(() => expect(ws.lastRequest('device.list')).toBeDefined());
    ws.reply(ws.lastRequest('device.list'), {
      devices: [
        { deviceId: 'd'.repeat(64), displayName: 'Pixel', roles: ['operator'], commands: [], connected: true, tokens: { operator: 'active' }, scope: 'role:writer' },
        { deviceId: 'e'.repeat(64), displayName: 'Build box', roles: ['node'], commands: ['system.run'], connected: true, tokens: { node: 'active' }, scope: 'authenticated' },
      ],
    });
    const shown = await screen.findAllByTestId('device-scope');
    expect(shown.map((e) => [e.dataset.scope, e.textContent])).toEqual([['role:writer', 'as role writer']]); // a node reads no memory
    await fireEvent.click(screen.getByTestId('device-scope-change'));
    const devSelect = screen.getAllByTestId('scope-select').at(-1) as HTMLSelectElement;
    expect(devSelect.value).toBe('role:writer'); // starts from the device's scope
    await fireEvent.click(screen.getAllByTestId('scope-everything').at(-1)!);
    await fireEvent.click(screen.getByTestId('device-scope-apply'));
    await waitFor(() => expect(ws.lastRequest('device.scope.set')?.params).toMatchObject({ deviceId: 'd'.repeat(64), scope: 'admin' }));
  });

  it('shows the scope in Chinese', async () => {
    setLang('zh');
    try {
      const gw = new GatewayClient({ url: 'ws://test/ws', token: 't', instanceId: 'i', WebSocket: FakeWebSocket, random: () => 0.5 });
      render(App, { props: { gw } });
      gw.start();
      const ws = FakeWebSocket.last();
      ws.handshake();
      await waitFor(() => expect(ws.lastRequest('device.list')).toBeDefined());
      ws.serverEvent('device.pair.requested', {
        request: { requestId: 'r2', deviceId: 'f'.repeat(64), displayName: 'iPhone', platform: 'iOS', roles: ['operator'], commands: [], remoteIp: '127.0.0.3', createdAt: Date.now(), kind: 'repair', scope: 'admin' },
      });
      await fireEvent.click(await screen.findByTestId('pair-banner-open'));
      const select = (await screen.findByTestId('scope-select')) as HTMLSelectElement;
      expect(select.options[0].textContent).toBe('仅共享笔记（已认证）');
      // A repair of a device that had everything: the box is not ticked for the person.
      expect((screen.getByTestId('scope-everything') as HTMLInputElement).checked).toBe(false);
      await fireEvent.click(screen.getByTestId('scope-everything'));
      expect(screen.getByTestId('scope-warning').textContent).toContain('设备一旦丢失');
    } finally {
      resetLang();
    }
  });
});
