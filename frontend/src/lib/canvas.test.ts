// The Canvas against a scripted gateway (issue 23): replay at every connect, a push answered only
// once the DOM shows it (or with its line-numbered errors), presses sent as canvas.action with the
// answer shown, Close as canvas.a2ui.reset, presented pages in a sandboxed frame, the phone's node commands.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cleanup, render } from '@testing-library/svelte';
import { tick } from 'svelte';
import { get } from 'svelte/store';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { CanvasView, SNAPSHOT_PAGE_ONLY, canvasNodeHandlers, closeNodeSurface, closeSurface, connectCanvas, hidePage, sendAction, parsePlacement, frameSource } from './canvas';
import { serveNode } from './nodeserve';
import CanvasPanel from '../components/CanvasPanel.svelte';
import { setLang } from './i18n.svelte';

const TEXT = (surfaceId: string, text: string) => [
  JSON.stringify({ beginRendering: { surfaceId, root: 't' } }),
  JSON.stringify({ surfaceUpdate: { surfaceId, components: [{ id: 't', component: { Text: { text: { literalString: text } } } }] } }),
];
const FORM = [
  { beginRendering: { surfaceId: 'f', root: 'col' } },
  {
    surfaceUpdate: {
      surfaceId: 'f',
      components: [
        { id: 'col', component: { Column: { children: { explicitList: ['name', 'go'] } } } },
        { id: 'name', component: { TextField: { label: { literalString: 'Name' }, text: { path: '/name' } } } },
        { id: 'go', component: { Button: { child: 'goText', action: { name: 'go', context: [{ key: 'name', value: { path: '/name' } }] } } } },
        { id: 'goText', component: { Text: { text: { literalString: 'Go' } } } },
      ],
    },
  },
];

let gw: GatewayClient;
let ws: FakeWebSocket;
/** The page's text at the moment each canvas.rendered left (what "rendered" meant then). */
let shownAtAck: string[];

function instrument(sock: FakeWebSocket) {
  const send = sock.send.bind(sock);
  sock.send = (data: string) => {
    if (JSON.parse(data).method === 'canvas.rendered') shownAtAck.push(document.body.textContent ?? '');
    send(data);
  };
}

beforeEach(() => {
  setLang('en');
  shownAtAck = [];
  FakeWebSocket.reset();
  gw = new GatewayClient({ url: 'ws://127.0.0.1:1/ws', WebSocket: FakeWebSocket });
  gw.start();
  ws = FakeWebSocket.last();
  instrument(ws);
});
afterEach(() => {
  cleanup();
  gw.stop();
});

const until = (cond: () => boolean) => vi.waitFor(() => expect(cond()).toBe(true), { timeout: 10_000, interval: 5 });
const requests = (sock: FakeWebSocket, method: string) => sock.sent.filter((f) => f.method === method);

function mountDesktop(view: CanvasView) {
  return render(CanvasPanel, {
    props: { view, onaction: (a) => sendAction(gw, 'desktop', a), onclose: (id) => closeSurface(gw, id), onhide: () => hidePage(gw) },
  });
}

describe('the desktop Canvas', () => {
  it('asks canvas.state at every connect and shows the kept surfaces again (a reload or reconnect keeps them)', async () => {
    const view = new CanvasView();
    const { container } = mountDesktop(view);
    connectCanvas(gw, view);
    ws.handshake();
    await until(() => requests(ws, 'canvas.state').length === 1);
    expect(requests(ws, 'canvas.state')[0].params).toEqual({ target: 'desktop' });
    ws.reply(requests(ws, 'canvas.state')[0], { target: 'desktop', surfaces: [{ surfaceId: 'a', version: 'v0.8', sessionKey: 'main/s', messages: TEXT('a', 'kept A') }] });
    await until(() => container.textContent!.includes('kept A'));
    // The connection drops and comes back: the state is asked again and replaces what was shown.
    ws.serverClose(1006, 'gone');
    await until(() => FakeWebSocket.instances.length === 2);
    const ws2 = FakeWebSocket.last();
    instrument(ws2);
    ws2.handshake();
    await until(() => requests(ws2, 'canvas.state').length === 1);
    ws2.reply(requests(ws2, 'canvas.state')[0], { target: 'desktop', surfaces: [{ surfaceId: 'b', version: 'v0.8', messages: TEXT('b', 'kept B') }] });
    await until(() => container.textContent!.includes('kept B'));
    expect(container.textContent).not.toContain('kept A');
    // A new surface asks for attention (the desktop brings the Canvas forward); the same one again after a reconnect does not.
    expect(get(view.attention)).toBe(2);
    ws2.serverClose(1006, 'gone');
    await until(() => FakeWebSocket.instances.length === 3);
    const ws3 = FakeWebSocket.last();
    ws3.handshake();
    await until(() => requests(ws3, 'canvas.state').length === 1);
    ws3.reply(requests(ws3, 'canvas.state')[0], { target: 'desktop', surfaces: [{ surfaceId: 'b', version: 'v0.8', messages: TEXT('b', 'kept B, again') }] });
    await until(() => container.textContent!.includes('kept B, again'));
    expect(get(view.attention)).toBe(2);
  });

  it('answers canvas.rendered only once the DOM shows the push; an invalid line is answered ok:false with its number', async () => {
    const view = new CanvasView();
    const { container } = mountDesktop(view);
    connectCanvas(gw, view);
    ws.handshake();
    ws.serverEvent('canvas.update', { pushId: 'p1', target: 'desktop', op: 'push', surfaces: ['s'], messages: TEXT('s', 'hello from the agent') });
    await until(() => requests(ws, 'canvas.rendered').length === 1);
    expect(requests(ws, 'canvas.rendered')[0].params).toMatchObject({ pushId: 'p1', ok: true });
    expect(shownAtAck[0]).toContain('hello from the agent');
    ws.serverEvent('canvas.update', {
      pushId: 'p2',
      target: 'desktop',
      op: 'push',
      messages: [JSON.stringify({ surfaceUpdate: { surfaceId: 's', components: [{ id: 't', component: { Text: { text: { literalString: 'changed' } } } }] } }), '{"surfaceUpdate":{"surfaceId":"s"}}'],
    });
    await until(() => requests(ws, 'canvas.rendered').length === 2);
    const ack = requests(ws, 'canvas.rendered')[1].params;
    expect(ack).toMatchObject({ pushId: 'p2', ok: false, errors: [{ line: 2, reason: expect.stringContaining('components') }] });
    expect(shownAtAck[1]).toContain('changed');
    expect(container.querySelector('[role="alert"]')?.textContent).toContain('2:');
  });

  it("sends a press as canvas.action with the form's values and shows the acknowledgement; Close asks canvas.a2ui.reset", async () => {
    const view = new CanvasView();
    const { container } = mountDesktop(view);
    connectCanvas(gw, view);
    ws.handshake();
    ws.serverEvent('canvas.update', { pushId: 'p1', op: 'push', target: 'desktop', messages: FORM });
    await until(() => container.querySelector('input') !== null);
    const input = container.querySelector('input') as HTMLInputElement;
    input.value = '王芳';
    input.dispatchEvent(new Event('input', { bubbles: true }));
    await tick();
    ([...container.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Go') as HTMLButtonElement).click();
    await until(() => requests(ws, 'canvas.action').length === 1);
    const req = requests(ws, 'canvas.action')[0];
    expect(req.params).toMatchObject({ target: 'desktop', surfaceId: 'f', componentId: 'go', name: 'go', context: { name: '王芳' } });
    expect(typeof req.params.idempotencyKey).toBe('string');
    expect(container.textContent).toContain('Sending…');
    ws.reply(req, { accepted: true, actionId: 'x', sessionKey: 'main/canvas', queued: true });
    await until(() => container.textContent!.includes('when it has finished its current answer'));
    ([...container.querySelectorAll('button')].find((b) => b.getAttribute('aria-label') === 'Close this surface') as HTMLButtonElement).click();
    await until(() => requests(ws, 'canvas.a2ui.reset').length === 1);
    expect(requests(ws, 'canvas.a2ui.reset')[0].params).toMatchObject({ target: 'desktop', surfaceId: 'f' });
    // The gateway tells every UI: the surface goes.
    ws.reply(requests(ws, 'canvas.a2ui.reset')[0], { pushId: 'r1', removed: ['f'], rendered: true });
    ws.serverEvent('canvas.update', { pushId: 'r1', op: 'reset', target: 'desktop', surfaces: ['f'] });
    await until(() => container.querySelector('[data-surface="f"]') === null);
  });

  it('a refused press says why', async () => {
    const view = new CanvasView();
    const { container } = mountDesktop(view);
    connectCanvas(gw, view);
    ws.handshake();
    ws.serverEvent('canvas.update', { pushId: 'p1', op: 'push', target: 'desktop', messages: FORM });
    await until(() => container.querySelector('button') !== null);
    ([...container.querySelectorAll('button')].find((b) => b.textContent?.trim() === 'Go') as HTMLButtonElement).click();
    await until(() => requests(ws, 'canvas.action').length === 1);
    ws.fail(requests(ws, 'canvas.action')[0], 'NOT_FOUND', 'no surface f');
    await until(() => container.textContent!.includes('Not sent'));
  });

  it('shows a presented page in a sandboxed frame (scripts, no same origin), placed where asked; refuses anything not http(s)', async () => {
    const view = new CanvasView({ base: 'http://127.0.0.1:18789/' });
    const { container } = mountDesktop(view);
    connectCanvas(gw, view);
    ws.handshake();
    ws.serverEvent('canvas.update', { pushId: 'p1', op: 'present', target: 'desktop', frameUrl: '/canvas/frame/0123abcd', placement: { x: 10, y: 20, width: 300, height: 200 } });
    await until(() => requests(ws, 'canvas.rendered').length === 1);
    const frame = container.querySelector('iframe') as HTMLIFrameElement;
    expect(frame.getAttribute('sandbox')).toBe('allow-scripts allow-forms');
    expect(frame.getAttribute('src')).toBe('http://127.0.0.1:18789/canvas/frame/0123abcd');
    const wrap = frame.parentElement as HTMLElement;
    expect([wrap.style.left, wrap.style.top, wrap.style.width, wrap.style.height]).toEqual(['10px', '20px', '300px', '200px']);
    ws.serverEvent('canvas.update', { pushId: 'p2', op: 'present', target: 'desktop', url: 'javascript:alert(1)' });
    await until(() => requests(ws, 'canvas.rendered').length === 2);
    expect(requests(ws, 'canvas.rendered')[1].params).toMatchObject({ pushId: 'p2', ok: false });
    expect(container.innerHTML).not.toContain('javascript:');
    ws.serverEvent('canvas.update', { pushId: 'p3', op: 'hide', target: 'desktop' });
    await until(() => container.querySelector('iframe') === null);
    // eval with no html page shown is answered, not left waiting.
    ws.serverEvent('canvas.update', { pushId: 'p4', op: 'eval', target: 'desktop', js: '1+1', timeoutMs: 1000 });
    await until(() => requests(ws, 'canvas.rendered').length === 4);
    expect(requests(ws, 'canvas.rendered')[3].params).toMatchObject({ pushId: 'p4', ok: false, error: expect.stringContaining('no html page') });
  });
});

describe('canvas.snapshot', () => {
  it('draws the surfaces (not the page) and answers pngBase64; a page alone is refused with the reason', async () => {
    const drawn: string[] = [];
    const view = new CanvasView({ base: 'http://127.0.0.1:18789/', snapshot: async (el) => (drawn.push(el.textContent ?? ''), 'iVBORw0KGgo=') });
    mountDesktop(view);
    connectCanvas(gw, view);
    ws.handshake();
    ws.serverEvent('canvas.update', { pushId: 'p0', op: 'present', target: 'desktop', url: 'https://example.com/' });
    await until(() => requests(ws, 'canvas.rendered').length === 1);
    ws.serverEvent('canvas.update', { pushId: 'p1', op: 'snapshot', target: 'desktop' });
    await until(() => requests(ws, 'canvas.rendered').length === 2);
    expect(requests(ws, 'canvas.rendered')[1].params).toMatchObject({ pushId: 'p1', ok: false, error: SNAPSHOT_PAGE_ONLY });
    ws.serverEvent('canvas.update', { pushId: 'p2', op: 'push', target: 'desktop', messages: TEXT('s', 'draw me') });
    await until(() => requests(ws, 'canvas.rendered').length === 3);
    ws.serverEvent('canvas.update', { pushId: 'p3', op: 'snapshot', target: 'desktop' });
    await until(() => requests(ws, 'canvas.rendered').length === 4);
    expect(requests(ws, 'canvas.rendered')[3].params).toMatchObject({ pushId: 'p3', ok: true, pngBase64: 'iVBORw0KGgo=' });
    expect(drawn).toEqual([expect.stringContaining('draw me')]);
  });
});

describe('the phone page Canvas (node commands)', () => {
  it('renders canvas.a2ui.push and answers {rendered:true}; replay drops what was shown; errors are answered with their lines', async () => {
    const node = new GatewayClient({ url: 'ws://127.0.0.1:1/ws', WebSocket: FakeWebSocket, role: 'node' });
    node.start();
    const nws = FakeWebSocket.last();
    nws.handshake();
    const view = new CanvasView();
    const { container } = render(CanvasPanel, { props: { view, phone: true, onaction: async () => ({ accepted: true }), onclose: (id: string) => view.reset([id]) } });
    serveNode(node, canvasNodeHandlers(view));
    const results = () => nws.sent.filter((f) => f.method === 'node.invoke.result').map((f) => f.params);
    nws.serverEvent('node.invoke.request', { id: 'i1', command: 'canvas.a2ui.push', params: { pushId: 'p1', messages: TEXT('a', 'on the phone') }, timeoutMs: 10_000 });
    await until(() => results().length === 1);
    expect(results()[0]).toEqual({ id: 'i1', ok: true, payload: { rendered: true } });
    expect(container.textContent).toContain('on the phone');
    nws.serverEvent('node.invoke.request', { id: 'i2', command: 'canvas.a2ui.push', params: { pushId: 'p2', replay: true, messages: TEXT('b', 'replayed') }, timeoutMs: 10_000 });
    await until(() => results().length === 2);
    expect(container.textContent).toContain('replayed');
    expect(container.textContent).not.toContain('on the phone');
    nws.serverEvent('node.invoke.request', { id: 'i3', command: 'canvas.a2ui.push', params: { pushId: 'p3', messages: ['{"bogus":1}'] }, timeoutMs: 10_000 });
    await until(() => results().length === 3);
    expect(results()[2].payload).toMatchObject({ rendered: false, errors: [{ line: 1, reason: expect.stringContaining('unknown A2UI version') }] });
    nws.serverEvent('node.invoke.request', { id: 'i4', command: 'canvas.a2ui.reset', params: { surfaces: ['b'] }, timeoutMs: 10_000 });
    await until(() => results().length === 4);
    expect(get(view.processor.surfaces)).toEqual([]);
    nws.serverEvent('node.invoke.request', { id: 'i5', command: 'canvas.present', params: { url: 'https://example.com/' }, timeoutMs: 10_000 });
    await until(() => results().length === 5);
    expect(container.querySelector('iframe')?.getAttribute('sandbox')).toBe('allow-scripts allow-forms');
    nws.serverEvent('node.invoke.request', { id: 'i6', command: 'canvas.snapshot', params: {}, timeoutMs: 10_000 });
    await until(() => results().length === 6);
    expect(results()[5]).toMatchObject({ id: 'i6', ok: false, error: { code: 'UNAVAILABLE' } });
    nws.answerAll('node.invoke.result', {}, new Set());
    node.stop();
  });
});

describe('closing a surface on the phone', () => {
  it('asks the gateway to forget it (canvas.a2ui.reset, the node\'s own target), so a reconnect does not bring it back', async () => {
    const node = new GatewayClient({ url: 'ws://127.0.0.1:1/ws', WebSocket: FakeWebSocket, role: 'node' });
    node.start();
    const nws = FakeWebSocket.last();
    nws.handshake();
    const view = new CanvasView();
    const { container } = render(CanvasPanel, { props: { view, phone: true, onaction: async () => ({ accepted: true }), onclose: (id: string) => closeNodeSurface(node, view, id) } });
    serveNode(node, canvasNodeHandlers(view));
    nws.serverEvent('node.invoke.request', { id: 'i1', command: 'canvas.a2ui.push', params: { pushId: 'p1', messages: TEXT('a', 'close me') }, timeoutMs: 10_000 });
    await until(() => container.textContent!.includes('close me'));
    const closing = closeNodeSurface(node, view, 'a');
    await until(() => requests(nws, 'canvas.a2ui.reset').length === 1);
    expect(requests(nws, 'canvas.a2ui.reset')[0].params).toMatchObject({ surfaceId: 'a' });
    expect(requests(nws, 'canvas.a2ui.reset')[0].params).not.toHaveProperty('target');
    nws.reply(requests(nws, 'canvas.a2ui.reset')[0], { reset: ['a'] });
    await closing;
    expect(get(view.processor.surfaces)).toEqual([]);
    nws.answerAll('node.invoke.result', {}, new Set());
    node.stop();
  });
  it('without a node connection hides it here and says it may come back', async () => {
    const view = new CanvasView();
    await view.push(TEXT('a', 'x'));
    expect(get(view.processor.surfaces)).toHaveLength(1);
    await expect(closeNodeSurface(null, view, 'a')).rejects.toThrow(/not connected/);
    expect(get(view.processor.surfaces)).toEqual([]);
  });
});

describe('helpers', () => {
  it('sendAction passes a v0.9 data model on, and sends none when the surface did not ask for it', async () => {
    ws.handshake();
    const a = sendAction(gw, 'desktop', { surfaceId: 's', componentId: 'b', name: 'go', context: { n: 1 }, dataModel: { n: 1, all: true } });
    const b = sendAction(gw, 'desktop', { surfaceId: 's', componentId: 'b', name: 'go', context: {} });
    await until(() => requests(ws, 'canvas.action').length === 2);
    const [first, second] = requests(ws, 'canvas.action');
    expect(first.params).toMatchObject({ target: 'desktop', surfaceId: 's', dataModel: { n: 1, all: true } });
    expect(second.params).not.toHaveProperty('dataModel');
    ws.reply(first, { accepted: true });
    ws.reply(second, { accepted: true });
    await Promise.all([a, b]);
  });
  it('parsePlacement wants four finite numbers and a positive size', () => {
    expect(parsePlacement({ x: 0, y: 0, width: 10, height: 10 })).toEqual({ x: 0, y: 0, width: 10, height: 10 });
    expect(parsePlacement({ x: 0, y: 0, width: 0, height: 10 })).toBeNull();
    expect(parsePlacement({ x: 'a', y: 0, width: 1, height: 1 })).toBeNull();
    expect(parsePlacement(null)).toBeNull();
  });
  it('frameSource takes http(s) only', () => {
    expect(frameSource('/canvas/frame/x', 'http://127.0.0.1:18789/')).toBe('http://127.0.0.1:18789/canvas/frame/x');
    expect(frameSource('javascript:alert(1)', 'http://h/')).toBeNull();
    expect(frameSource('data:text/html,x', 'http://h/')).toBeNull();
    expect(frameSource('file:///etc/passwd', 'http://h/')).toBeNull();
  });
});
