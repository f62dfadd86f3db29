// The phone page's controller against scripted WebSockets: the pairing connection carries the
// setup code and a proof the gateway can verify; approval stores the tokens and opens one
// connection per role; a token mismatch drops the token, keeps the key and asks to repair.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GatewayClient } from './gateway';
import { FakeWebSocket } from './testing/fakeWebSocket';
import { signedPayloadV2, type DeviceKey } from './device';
import { parsePairFragment, type StoredPairing } from './pairing';
import { KEY_RECORD, MemoryKV, PAIRING_RECORD, PhoneSession, deviceDisplayName, loadOrCreateKey } from './phone';
import { PHONE_CAPS, PHONE_COMMANDS } from './nodeserve';

const G = 'ab'.repeat(32);
const F = 'cd'.repeat(32);
const subtle = globalThis.crypto.subtle;

function fromB64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Checks a connect frame's device proof the way the gateway does (v2, this nonce, the token it carries). */
async function verifyProof(frame: any, nonce: string): Promise<boolean> {
  const p = frame.params;
  const d = p.device;
  const token = p.auth.deviceToken ?? p.auth.setupCode ?? p.auth.token ?? '';
  const msg = signedPayloadV2({ gatewayId: G, deviceId: d.id, clientId: p.client.id, mode: p.client.mode, role: p.role, scopes: p.scopes, signedAtMs: d.signedAt, token, nonce });
  const alg = d.algorithm === 'ed25519' ? { name: 'Ed25519' } : { name: 'ECDSA', namedCurve: 'P-256' };
  const pub = await subtle.importKey('raw', fromB64(d.publicKey), alg, true, ['verify']);
  const ver = d.algorithm === 'ed25519' ? { name: 'Ed25519' } : { name: 'ECDSA', hash: 'SHA-256' };
  return subtle.verify(ver, pub, fromB64(d.signature), new TextEncoder().encode(msg));
}

function hello(ws: FakeWebSocket, auth: Record<string, unknown>) {
  const req = ws.connectFrame();
  ws.serverSend({ type: 'res', id: req.id, ok: true, payload: { type: 'hello-ok', protocol: 1, server: { version: 't', connId: 'c', gatewayId: G }, features: { methods: [] }, policy: {}, auth } });
}

async function handshakeUntilConnect(ws: FakeWebSocket, nonce: string): Promise<any> {
  ws.serverOpen();
  ws.serverEvent('connect.challenge', { nonce, ts: Date.now() });
  await vi.waitFor(() => expect(ws.connectFrame()).toBeTruthy());
  return ws.connectFrame();
}

let store: MemoryKV;
let session: PhoneSession;

function makeSession(hash: string) {
  session = new PhoneSession({
    wsUrl: 'wss://127.0.0.2:18789/ws',
    store,
    fragment: parsePairFragment(hash),
    instanceId: 'inst',
    displayName: 'Android · Chrome',
    platform: 'Linux armv8l',
    client: (o) => new GatewayClient({ ...o, WebSocket: FakeWebSocket, random: () => 0.5 }),
  });
  return session;
}

beforeEach(() => {
  FakeWebSocket.reset();
  store = new MemoryKV();
});
afterEach(() => session?.stop());

describe('PhoneSession', () => {
  it('pairs with the code, stores the tokens, reconnects per role; a mismatch repairs without losing the key', async () => {
    const s = makeSession(`#c=abcd-2345&g=${G}&f=${F}`);
    await s.start();
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(1));
    const key = await store.get<DeviceKey>(KEY_RECORD);
    expect(key?.privateKey.extractable).toBe(false);

    // 1. The pairing connection: setup code, both roles asked, the phone's commands declared, a valid proof.
    const pairWs = FakeWebSocket.instances[0];
    expect(pairWs.url).toBe('wss://127.0.0.2:18789/ws');
    const c1 = await handshakeUntilConnect(pairWs, 'nonce-1');
    expect(c1.params).toMatchObject({
      role: 'node',
      roles: ['operator', 'node'],
      commands: [...PHONE_COMMANDS],
      caps: [...PHONE_CAPS],
      auth: { setupCode: 'ABCD2345' },
      client: { id: 'atrium-phone', mode: 'node', displayName: 'Android · Chrome', instanceId: 'inst-pair' },
      device: { id: key!.deviceId, algorithm: key!.algorithm, publicKey: key!.publicKey, nonce: 'nonce-1' },
    });
    expect(await verifyProof(c1, 'nonce-1')).toBe(true);
    expect(await verifyProof(c1, 'nonce-2')).toBe(false);

    hello(pairWs, { status: 'pending', requestId: 'r1', role: 'unpaired', gatewayId: G });
    expect(s.state.pair.phase).toEqual({ phase: 'pending', requestId: 'r1', repair: false });

    // 2. Approved: tokens kept, the pairing connection closed, one connection per role with its token.
    pairWs.serverEvent('device.pair.resolved', { requestId: 'r1', deviceId: key!.deviceId, decision: 'approved', deviceTokens: { operator: 'op-1', node: 'nd-1' } });
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(3));
    expect(pairWs.closedWith).not.toBeNull();
    await vi.waitFor(async () => expect((await store.get<StoredPairing>(PAIRING_RECORD))?.tokens).toEqual({ operator: 'op-1', node: 'nd-1' }));
    const [opWs, nodeWs] = FakeWebSocket.instances.slice(1);
    const cOp = await handshakeUntilConnect(opWs, 'nonce-op');
    expect(cOp.params).toMatchObject({ role: 'operator', auth: { deviceToken: 'op-1' }, client: { id: 'atrium-ui', mode: 'ui', instanceId: 'inst' }, commands: [] });
    expect(await verifyProof(cOp, 'nonce-op')).toBe(true);
    hello(opWs, { status: 'paired', role: 'operator', deviceId: key!.deviceId });
    expect(s.conn('operator')?.state.state).toBe('connected');
    expect(s.state.pair.phase).toEqual({ phase: 'paired', roles: ['operator', 'node'] });

    // 3. The node token is refused as a mismatch: only it is dropped, the key stays, a repair is asked.
    const cNode = await handshakeUntilConnect(nodeWs, 'nonce-node');
    expect(cNode.params).toMatchObject({ role: 'node', auth: { deviceToken: 'nd-1' }, commands: [...PHONE_COMMANDS], client: { instanceId: 'inst' } });
    expect(await verifyProof(cNode, 'nonce-node')).toBe(true);
    nodeWs.serverSend({ type: 'res', id: cNode.id, ok: false, error: { code: 'UNAUTHORIZED', message: 'device token mismatch', details: { reason: 'device_token_mismatch', repairable: true } } });
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(4));
    expect(await store.get<DeviceKey>(KEY_RECORD)).toBe(key);
    await vi.waitFor(async () => expect((await store.get<StoredPairing>(PAIRING_RECORD))?.tokens).toEqual({ operator: 'op-1' }));
    const repairWs = FakeWebSocket.instances[3];
    const cRep = await handshakeUntilConnect(repairWs, 'nonce-rep');
    expect(cRep.params.auth).toEqual({}); // neither a token nor a code: the proof alone
    expect(cRep.params.device.id).toBe(key!.deviceId);
    expect(await verifyProof(cRep, 'nonce-rep')).toBe(true);
    hello(repairWs, { status: 'pending', requestId: 'r2' });
    expect(s.state.pair.phase).toEqual({ phase: 'pending', requestId: 'r2', repair: true });
  });

  it('a reload keeps the key and connects with the stored tokens', async () => {
    const first = await loadOrCreateKey(store);
    await store.set(PAIRING_RECORD, { gatewayId: G, fingerprint: F, tokens: { node: 'nd-9' } });
    const s = makeSession('');
    await s.start();
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(1));
    const c = await handshakeUntilConnect(FakeWebSocket.last(), 'n9');
    expect(c.params.device.id).toBe(first.deviceId);
    expect(c.params.auth).toEqual({ deviceToken: 'nd-9' });
    expect(await loadOrCreateKey(store)).toBe(first);
  });

  it('revoked while connected (close 4001): connects again once, the mismatch then leads to a repair', async () => {
    const key = await loadOrCreateKey(store);
    await store.set(PAIRING_RECORD, { gatewayId: G, fingerprint: F, tokens: { node: 'nd-1' } });
    const s = makeSession('');
    await s.start();
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(1));
    const ws1 = FakeWebSocket.last();
    await handshakeUntilConnect(ws1, 'a');
    hello(ws1, { status: 'paired', role: 'node' });
    ws1.serverClose(4001, 'device token revoked');
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(2));
    const ws2 = FakeWebSocket.last();
    const c2 = await handshakeUntilConnect(ws2, 'b');
    expect(c2.params.auth).toEqual({ deviceToken: 'nd-1' });
    ws2.serverSend({ type: 'res', id: c2.id, ok: false, error: { code: 'UNAUTHORIZED', message: 'device token mismatch', details: { reason: 'device_token_mismatch', repairable: true } } });
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(3));
    const c3 = await handshakeUntilConnect(FakeWebSocket.last(), 'c');
    expect(c3.params.auth).toEqual({});
    expect(c3.params.device.id).toBe(key.deviceId);
    expect((await store.get<StoredPairing>(PAIRING_RECORD))?.tokens).toEqual({});
  });

  it('a spent code: the refusal is shown and nothing retries on its own', async () => {
    const s = makeSession(`#c=abcd-2345&g=${G}&f=${F}`);
    await s.start();
    await vi.waitFor(() => expect(FakeWebSocket.instances).toHaveLength(1));
    const c = await handshakeUntilConnect(FakeWebSocket.last(), 'n');
    FakeWebSocket.last().serverSend({ type: 'res', id: c.id, ok: false, error: { code: 'NOT_PAIRED', message: 'setup code expired or already used' } });
    expect(s.state.pair.phase).toEqual({ phase: 'failed', code: 'NOT_PAIRED', message: 'setup code expired or already used' });
    await new Promise((r) => setTimeout(r, 50));
    expect(FakeWebSocket.instances).toHaveLength(1);
  });

  it('names the device from its user agent', () => {
    expect(deviceDisplayName('Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36')).toBe('Android · Chrome');
    expect(deviceDisplayName('Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1')).toBe('iOS · Safari');
    expect(deviceDisplayName('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0 Safari/537.36')).toBe('Linux · Chrome');
  });
});
