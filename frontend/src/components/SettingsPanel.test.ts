// The Settings panel's gateway section against a scripted gateway: the LAN listeners, the TLS
// fingerprint (words and hex), the gateway id and mDNS as config.get reports them; a bind change
// is sent with config.patch and said to need a restart.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { fireEvent, render, screen, waitFor } from '@testing-library/svelte';
import SettingsPanel from './SettingsPanel.svelte';
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

function answer(ws: FakeWebSocket, method: string, payload: unknown, done: Set<string>): any[] {
  const out: any[] = [];
  for (const f of ws.sent) {
    if (f.method === method && !done.has(f.id)) {
      done.add(f.id);
      ws.reply(f, payload);
      out.push(f.params);
    }
  }
  return out;
}

const fp = '6a8309c8eba05acf121fda093cc677736243d5e3690f041e48550edccffac2b6';
const gwid = 'ab'.repeat(32);
const spki = 'JHnwE0X/JtOmc1rRdN3Uw2MNwjt7LxMMM8xEhgm4cKE=';
const view = (restart: string[] = []) => ({
  path: '/h/config.json',
  config: { gateway: { bind: '127.0.0.2' } },
  model: { provider: 'offline', model: '', baseUrl: '', reason: '' },
  gateway: {
    addr: '127.0.0.1:18789',
    bind: '127.0.0.2',
    addresses: ['127.0.0.2:18789'],
    urls: ['https://127.0.0.2:18789/'],
    tlsFingerprint: fp,
    tlsFingerprintWords: 'kopag bolam vovob joraz',
    tlsSpki: spki,
    gatewayId: gwid,
    mdns: 'retrying',
  },
  embedding: { provider: 'builtin', model: 'm', dims: 384, files: 1, chunks: 1 },
  restartRequired: restart,
});

beforeEach(() => {
  FakeWebSocket.reset();
  resetLang();
});

describe('settings: gateway', () => {
  it('shows the LAN address, the fingerprint and the gateway id; a bind change needs a restart', async () => {
    setLang('zh');
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'config.get', view(), done)).toHaveLength(1));
    answer(ws, 'config.detect', { servers: [] }, done);
    await waitFor(() => expect(screen.getByTestId('gateway-fingerprint-words').textContent).toBe('kopag bolam vovob joraz'));
    expect(screen.getByTestId('gateway-fingerprint').textContent).toBe(fp);
    const lan = screen.getByTestId('gateway-lan').textContent ?? '';
    expect(lan).toContain('https://127.0.0.2:18789/');
    expect(lan).toContain(gwid);
    expect(lan).toContain('证书指纹');
    expect(screen.getByTestId('gateway-mdns').textContent).toBe('失败，正在重试（见日志）');
    expect((screen.getByTestId('gateway-bind') as HTMLInputElement).value).toBe('127.0.0.2');

    await fireEvent.input(screen.getByTestId('gateway-bind'), { target: { value: ' lan ' } });
    await fireEvent.click(screen.getByTestId('gateway-save'));
    let sent: any[] = [];
    await waitFor(() => {
      sent = answer(ws, 'config.patch', view(['gateway']), done);
      expect(sent).toHaveLength(1);
    });
    expect(sent[0].patch).toEqual({ gateway: { port: null, bind: 'lan' } });
    await waitFor(() => expect(screen.getByTestId('settings-restart').textContent).toContain('网关端口/绑定'));
  });

  it('shows the SPKI hash with a copy button, and why mDNS cannot advertise (en, zh)', async () => {
    const writeText = vi.fn(async (_: string) => {});
    Object.defineProperty(navigator, 'clipboard', { value: { writeText }, configurable: true });
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    const v = view();
    Object.assign(v.gateway, { mdnsReason: 'no-multicast', mdnsInterfaces: ['lo'], mdnsError: 'no multicast interface: the interfaces of [127.0.0.2] (lo) have no multicast' });
    await waitFor(() => expect(answer(ws, 'config.get', v, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('gateway-spki').textContent).toBe(spki));
    expect(screen.getByTestId('gateway-lan').textContent).toContain('--ignore-certificate-errors-spki-list');
    expect(screen.getByTestId('gateway-mdns').textContent).toBe('not possible on lo: no multicast (phones must scan the QR code)');
    expect(screen.getByTestId('gateway-mdns').title).toContain('have no multicast');
    await fireEvent.click(screen.getByTestId('copy-spki'));
    await waitFor(() => expect(screen.getByTestId('copy-spki').textContent).toBe('Copied'));
    expect(writeText).toHaveBeenCalledWith(spki);
    setLang('zh');
    await waitFor(() => expect(screen.getByTestId('gateway-mdns').textContent).toBe('无法在 lo 上广播：该接口不支持多播（手机须扫描二维码）'));
    expect(screen.getByTestId('gateway-lan').textContent).toContain('公钥（SPKI SHA-256）');
    // A page that may not write the clipboard asks to select and copy instead.
    writeText.mockRejectedValueOnce(new Error('denied'));
    await fireEvent.click(screen.getByTestId('copy-fingerprint'));
    await waitFor(() => expect(screen.getByRole('status').textContent).toBe('无法复制：请选中文字后复制'));
  });

  it('says when the gateway is not on the LAN', async () => {
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    const v = view();
    v.gateway = { addr: '127.0.0.1:18789', bind: 'loopback', addresses: [], urls: [], gatewayId: gwid } as any;
    await waitFor(() => expect(answer(ws, 'config.get', v, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('gateway-lan').textContent).toContain('not served: this computer only'));
    expect(screen.queryByTestId('gateway-fingerprint')).toBeNull();
  });
});

describe('settings: images', () => {
  it('says whether the model in use takes images, and saves the override', async () => {
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    const v = view();
    Object.assign(v, {
      config: { model: { provider: 'ollama', model: 'llava', vision: true } },
      model: { provider: 'ollama', model: 'llava', baseUrl: 'http://127.0.0.1:11434/v1', reason: '', vision: 'yes', visionFrom: 'config' },
    });
    await waitFor(() => expect(answer(ws, 'config.get', v, done)).toHaveLength(1));
    answer(ws, 'config.detect', { servers: [] }, done);
    await waitFor(() => expect(screen.getByTestId('model-vision').dataset.vision).toBe('yes'));
    expect(screen.getByTestId('model-vision').textContent).toBe('Images: the model takes images: photos are shown to it (set in config.json)');
    expect((screen.getByTestId('model-vision-override') as HTMLSelectElement).value).toBe('yes');
    await fireEvent.change(screen.getByTestId('model-vision-override'), { target: { value: 'no' } });
    await fireEvent.click(screen.getByTestId('model-save'));
    let sent: any[] = [];
    await waitFor(() => {
      sent = answer(ws, 'config.patch', v, done);
      expect(sent).toHaveLength(1);
    });
    expect(sent[0].patch.model).toMatchObject({ provider: 'ollama', model: 'llava', vision: false });
  });
});

describe('settings: errors in the UI language (issue 24 item 8)', () => {
  it("says a refused save in Chinese by the error's code, the server's message kept as the detail", async () => {
    setLang('zh');
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'config.get', view(), done)).toHaveLength(1));
    answer(ws, 'config.detect', { servers: [] }, done);
    await waitFor(() => expect(screen.getByTestId('model-save')).toBeTruthy());
    await fireEvent.click(screen.getByTestId('model-save'));
    await waitFor(() => expect(ws.sent.some((f) => f.method === 'config.patch')).toBe(true));
    const f = ws.sent.find((x) => x.method === 'config.patch')!;
    ws.fail(f, 'FORBIDDEN', 'config.patch: only the person at this computer changes settings');
    await waitFor(() => expect(screen.getByTestId('settings-error').textContent).toContain('不允许这样做（config.patch: only the person at this computer changes settings）'));
  });
});

describe('settings: heartbeat and the bind in force (issue 24 items 7, 10)', () => {
  it('shows the bind the gateway serves on, not the placeholder "loopback"', async () => {
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    const v = view();
    v.config = {} as any; // bind not in config.json: serving on what --bind lan chose
    v.gateway.bind = 'lan';
    await waitFor(() => expect(answer(ws, 'config.get', v, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('gateway-bind-in-use').textContent).toBe('(bind in force: lan)'));
    expect((screen.getByTestId('gateway-bind') as HTMLInputElement).placeholder).toBe('lan');
  });

  it("every field's label names its control, and a field's hint is read with it (en, zh)", async () => {
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    await waitFor(() => expect(answer(ws, 'config.get', view(), done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('gateway-bind-in-use')).toBeTruthy());
    const hint = (testid: string) => {
      const id = screen.getByTestId(testid).getAttribute('aria-describedby');
      return id ? document.getElementById(id)?.textContent : null;
    };
    expect(screen.getByLabelText('Bind')).toBe(screen.getByTestId('gateway-bind'));
    expect(hint('gateway-bind')).toMatch(/^loopback: this computer only/);
    expect(hint('heartbeat-end')).toMatch(/^Local time, HH:MM/);
    for (const l of document.querySelectorAll<HTMLLabelElement>('.settings label[for]')) expect(l.control, l.htmlFor).not.toBeNull();
    setLang('zh');
    await waitFor(() => expect(hint('gateway-bind')).toMatch(/^loopback：仅本机/));
    expect(hint('heartbeat-end')).toMatch(/^本地时间/);
  });

  it('shows the schedule in force and saves mode, interval and active hours (en, zh)', async () => {
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    const v: any = view();
    v.heartbeat = { on: true, auto: true, fileUsed: true, everyMinutes: 30, start: '00:00', end: '00:00', lastRun: 1, lastOutcome: 'silent', next: 2 };
    await waitFor(() => expect(answer(ws, 'config.get', v, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('heartbeat-in-use').dataset.on).toBe('true'));
    const inUse = screen.getByTestId('heartbeat-in-use').textContent ?? '';
    expect(inUse).toContain('On: every 30 minutes.');
    expect(inUse).toContain('the workspace uses HEARTBEAT.md');
    expect(screen.getByTestId('heartbeat-last').textContent).toContain('nothing to report (HEARTBEAT_OK)');
    expect((screen.getByTestId('heartbeat-mode') as HTMLSelectElement).value).toBe('auto');

    // A bad interval is refused here, in the person's language, before anything is sent.
    setLang('zh');
    await fireEvent.input(screen.getByTestId('heartbeat-every'), { target: { value: '0' } });
    await fireEvent.click(screen.getByTestId('heartbeat-save'));
    await waitFor(() => expect(screen.getByTestId('settings-error').textContent).toBe('间隔：1 到 1440 之间的整数分钟。'));
    expect(ws.sent.some((f: any) => f.method === 'config.patch')).toBe(false);

    await fireEvent.change(screen.getByTestId('heartbeat-mode'), { target: { value: 'on' } });
    await fireEvent.input(screen.getByTestId('heartbeat-every'), { target: { value: '45' } });
    await fireEvent.input(screen.getByTestId('heartbeat-start'), { target: { value: '08:00' } });
    await fireEvent.input(screen.getByTestId('heartbeat-end'), { target: { value: '22:00' } });
    await fireEvent.click(screen.getByTestId('heartbeat-save'));
    let sent: any[] = [];
    const after = { ...v, heartbeat: { ...v.heartbeat, auto: false, everyMinutes: 45, start: '08:00', end: '22:00' },
      config: { agents: { heartbeat: { enabled: true, every: '45m', activeHours: { start: '08:00', end: '22:00' } } } } };
    await waitFor(() => {
      sent = answer(ws, 'config.patch', after, done);
      expect(sent).toHaveLength(1);
    });
    expect(sent[0].patch).toEqual({ agents: { heartbeat: { enabled: true, every: '45m', activeHours: { start: '08:00', end: '22:00' } } } });
    await waitFor(() => expect(screen.getByTestId('heartbeat-in-use').textContent).toContain('已开启：每 45 分钟一次。'));
    expect((screen.getByTestId('heartbeat-mode') as HTMLSelectElement).value).toBe('on');
  });
});

describe('settings: rewriting weak questions (issue 25 item 5)', () => {
  it('shows the measured latency (en, zh) and saves memory.search.rewrite with its time limit', async () => {
    const { gw, ws } = connect();
    render(SettingsPanel, { gw, connected: true });
    const done = new Set<string>();
    const v: any = view();
    v.config = { memory: { search: { rewrite: true } } };
    v.rewrite = { on: true, calls: 12, failures: 1, lastMs: 640, medianMs: 812 };
    await waitFor(() => expect(answer(ws, 'config.get', v, done)).toHaveLength(1));
    await waitFor(() => expect(screen.getByTestId('rewrite-latency').textContent).toBe('Measured: median 812 ms, last 640 ms (12 rewrites, 1 failed or timed out).'));
    expect((screen.getByTestId('rewrite-on') as HTMLInputElement).checked).toBe(true);
    setLang('zh');
    await waitFor(() => expect(screen.getByTestId('rewrite-latency').textContent).toBe('实测：中位数 812 毫秒，最近一次 640 毫秒（改写 12 次，失败或超时 1 次）。'));

    await fireEvent.click(screen.getByTestId('rewrite-on'));
    await fireEvent.input(screen.getByLabelText('改写时限（毫秒）'), { target: { value: '2500' } });
    await fireEvent.click(screen.getByTestId('rewrite-save'));
    let sent: any[] = [];
    await waitFor(() => {
      sent = answer(ws, 'config.patch', view(['memory.search']), done);
      expect(sent).toHaveLength(1);
    });
    expect(sent[0].patch).toEqual({ memory: { search: { rewrite: null, rewriteTimeoutMs: 2500 } } });
    await waitFor(() => expect(screen.getByTestId('rewrite-latency').textContent).toBe('当前运行的应用未开启。'));
  });
});
