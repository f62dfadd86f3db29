// The phone page's controller (/pair, issue 16): it keeps the device key and what pairing gave
// (gatewayId, fingerprint, tokens) in IndexedDB, runs the pairing state machine (lib/pairing.ts)
// and opens the connections it asks for: one pairing connection (setup code or proof alone), then
// one connection per paired role with its device token — the node connection serves commands, the
// operator connection carries the chat and memory UI.
import { writable, type Readable } from 'svelte/store';
import { GatewayClient, type ConnStatus, type GatewayOptions } from './gateway';
import { generateDeviceKey, signConnect, type DeviceKey } from './device';
import { initialPairState, pairStep, type FragmentResult, type PairEffect, type PairEvent, type PairState, type Role, type StoredPairing, type Tokens } from './pairing';
import { phoneDeclares } from './nodeserve';
import { screenCaptureAvailable } from './screen';

/** A small async key-value store (IndexedDB in the page, a Map in tests). Values are structured-cloned. */
export interface KVStore {
  get<T>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown): Promise<void>;
  delete(key: string): Promise<void>;
}

export class MemoryKV implements KVStore {
  readonly data = new Map<string, unknown>();
  async get<T>(key: string): Promise<T | undefined> {
    return this.data.get(key) as T | undefined;
  }
  async set(key: string, value: unknown): Promise<void> {
    this.data.set(key, value);
  }
  async delete(key: string): Promise<void> {
    this.data.delete(key);
  }
}

/** IndexedDB database "atrium-device", store "kv" (one per origin, so one per gateway address). */
export function indexedDBStore(idb: IDBFactory = globalThis.indexedDB, name = 'atrium-device'): KVStore {
  let dbp: Promise<IDBDatabase> | null = null;
  const db = () =>
    (dbp ??= new Promise<IDBDatabase>((resolve, reject) => {
      if (!idb) {
        reject(new Error('this browser has no IndexedDB (a private window?): the device key cannot be kept'));
        return;
      }
      const req = idb.open(name, 1);
      req.onupgradeneeded = () => req.result.createObjectStore('kv');
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error ?? new Error('cannot open IndexedDB'));
    }));
  const run = <T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest): Promise<T> =>
    db().then(
      (d) =>
        new Promise<T>((resolve, reject) => {
          const tx = d.transaction('kv', mode);
          const req = f(tx.objectStore('kv'));
          tx.oncomplete = () => resolve(req.result as T);
          tx.onerror = () => reject(tx.error ?? new Error('IndexedDB transaction failed'));
          tx.onabort = () => reject(tx.error ?? new Error('IndexedDB transaction aborted'));
        }),
    );
  return {
    get: <T>(key: string) => run<T | undefined>('readonly', (s) => s.get(key)),
    set: (key, value) => run<void>('readwrite', (s) => s.put(value, key)).then(() => undefined),
    delete: (key) => run<void>('readwrite', (s) => s.delete(key)).then(() => undefined),
  };
}

export const KEY_RECORD = 'deviceKey';
export const PAIRING_RECORD = 'pairing';

/** The stored device key, or a new one (stored at once). The key is never deleted here. */
export async function loadOrCreateKey(store: KVStore, make: () => Promise<DeviceKey> = () => generateDeviceKey()): Promise<DeviceKey> {
  const k = await store.get<DeviceKey>(KEY_RECORD);
  if (k && k.privateKey && k.publicKey && k.deviceId) return k;
  const fresh = await make();
  await store.set(KEY_RECORD, fresh);
  return fresh;
}

/** A short name for this device ("Android · Chrome"), what the desktop lists. */
export function deviceDisplayName(ua: string): string {
  const os = /Android/i.test(ua)
    ? 'Android'
    : /iPhone|iPad|iPod/i.test(ua)
      ? 'iOS'
      : /Windows/i.test(ua)
        ? 'Windows'
        : /Mac OS X|Macintosh/i.test(ua)
          ? 'macOS'
          : /Linux/i.test(ua)
            ? 'Linux'
            : 'Browser';
  const br = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox' : /Chrom(e|ium)\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'Web';
  return `${os} · ${br}`;
}

export interface PhoneOptions {
  wsUrl: string;
  store: KVStore;
  fragment: FragmentResult;
  /** A per-page id: the pairing connection uses <id>-pair as client.instanceId, the operator and node connections <id> itself, so the gateway's presence lists this phone once (issue 24). */
  instanceId: string;
  displayName: string;
  platform?: string;
  /** Defaults to loadOrCreateKey(store). */
  key?: () => Promise<DeviceKey>;
  /** Makes a GatewayClient (tests pass one with a fake WebSocket). */
  client?: (o: GatewayOptions) => GatewayClient;
  now?: () => number;
  /** The caps and commands declared at connect (default phoneDeclares: screen.* where the browser can capture the screen). */
  declares?: { caps: string[]; commands: string[] };
}

export interface PhoneView {
  pair: PairState;
  deviceId: string | null;
  algorithm: string | null;
  /** Status per connection ("pair", "operator", "node"). */
  conns: Partial<Record<'pair' | Role, ConnStatus>>;
  error: string | null;
}

const ROLES: Role[] = ['operator', 'node'];

/** Runs the pairing state machine against real connections. */
export class PhoneSession {
  readonly view: Readable<PhoneView>;
  private readonly _view = writable<PhoneView>({ pair: initialPairState, deviceId: null, algorithm: null, conns: {}, error: null });
  private current: PhoneView = { pair: initialPairState, deviceId: null, algorithm: null, conns: {}, error: null };
  private readonly opts: PhoneOptions;
  private key: DeviceKey | null = null;
  private pairConn: GatewayClient | null = null;
  /** The setup code the pairing connection offers; null once the request exists (then the proof alone). */
  private pairCode: string | null = null;
  private readonly roleConns = new Map<Role, GatewayClient>();
  private readonly offs: (() => void)[] = [];
  private readonly connListeners = new Set<(role: Role, gw: GatewayClient | null) => void>();
  private stopped = false;

  /** What the node connections declare (PhoneOptions.declares). */
  readonly declares: { caps: string[]; commands: string[] };

  constructor(opts: PhoneOptions) {
    this.opts = opts;
    this.declares = opts.declares ?? phoneDeclares(screenCaptureAvailable(globalThis.navigator?.mediaDevices));
    this.view = { subscribe: this._view.subscribe };
  }

  get state(): PhoneView {
    return this.current;
  }

  /** The node's deviceId and device token (the HTTPS fallback of a media transfer), once paired as a node. */
  nodeCredential(): { deviceId: string; token: string } | null {
    const token = this.current.pair.tokens.node;
    return this.key && token ? { deviceId: this.key.deviceId, token } : null;
  }

  /** The connection of a paired role, once open. */
  conn(role: Role): GatewayClient | null {
    return this.roleConns.get(role) ?? null;
  }

  /** Called with (role, client) when a role's connection is opened, (role, null) when it is closed. */
  onConn(f: (role: Role, gw: GatewayClient | null) => void): () => void {
    this.connListeners.add(f);
    return () => this.connListeners.delete(f);
  }

  async start(): Promise<void> {
    try {
      this.key = await (this.opts.key ?? (() => loadOrCreateKey(this.opts.store)))();
      this.patch({ deviceId: this.key.deviceId, algorithm: this.key.algorithm });
      const stored = (await this.opts.store.get<StoredPairing>(PAIRING_RECORD)) ?? null;
      this.dispatch({ type: 'loaded', stored, fragment: this.opts.fragment });
    } catch (e) {
      this.patch({ error: e instanceof Error ? e.message : String(e) });
    }
  }

  stop(): void {
    this.stopped = true;
    this.closeAll();
  }

  /** Feeds the state machine and runs the effects it asks for. */
  dispatch(ev: PairEvent): void {
    if (this.stopped) return;
    const step = pairStep(this.current.pair, ev);
    this.patch({ pair: step.state });
    for (const e of step.effects) this.run(e);
  }

  retry(): void {
    this.dispatch({ type: 'retry' });
  }

  private patch(p: Partial<PhoneView>): void {
    this.current = { ...this.current, ...p };
    this._view.set(this.current);
  }

  private setConn(which: 'pair' | Role, s: ConnStatus | null): void {
    const conns = { ...this.current.conns };
    if (s) conns[which] = s;
    else delete conns[which];
    this.patch({ conns });
  }

  private run(e: PairEffect): void {
    switch (e.type) {
      case 'save':
        this.opts.store.set(PAIRING_RECORD, e.stored).catch((err) => this.patch({ error: `cannot keep the pairing: ${String(err)}` }));
        return;
      case 'disconnect':
        this.closeAll();
        return;
      case 'connect-pair':
        this.closeAll();
        this.openPair(e.setupCode);
        return;
      case 'connect-paired':
        this.closeAll();
        for (const role of ROLES) if (e.tokens[role]) this.openRole(role, e.tokens);
        return;
    }
  }

  private closeAll(): void {
    while (this.offs.length) this.offs.pop()!();
    if (this.pairConn) {
      this.pairConn.stop();
      this.pairConn = null;
      this.setConn('pair', null);
    }
    for (const [role, gw] of this.roleConns) {
      gw.stop();
      this.setConn(role, null);
      for (const f of this.connListeners) f(role, null);
    }
    this.roleConns.clear();
  }

  private client(o: Omit<GatewayOptions, 'url' | 'prepareConnect' | 'displayName' | 'platform'>, auth: () => { deviceToken?: string; setupCode?: string }): GatewayClient {
    const gatewayId = this.current.pair.gatewayId ?? '';
    const full: GatewayOptions = {
      ...o,
      url: this.opts.wsUrl,
      displayName: this.opts.displayName,
      platform: this.opts.platform,
      prepareConnect: async (params, ch) => {
        if (!this.key) throw new Error('no device key');
        const a = auth();
        const token = a.deviceToken ?? a.setupCode ?? '';
        const device = await signConnect(
          this.key,
          { gatewayId, clientId: params.client.id, mode: params.client.mode, role: params.role, scopes: params.scopes, token, nonce: ch.nonce },
          this.opts.now?.() ?? Date.now(),
        );
        return { ...params, auth: a, device };
      },
    };
    return this.opts.client ? this.opts.client(full) : new GatewayClient(full);
  }

  private openPair(setupCode: string | null): void {
    this.pairCode = setupCode;
    const gw = this.client(
      {
        role: 'node',
        roles: [...ROLES],
        mode: 'node',
        clientId: 'atrium-phone',
        caps: [...this.declares.caps],
        commands: [...this.declares.commands],
        instanceId: `${this.opts.instanceId}-pair`,
      },
      () => (this.pairCode ? { setupCode: this.pairCode } : {}),
    );
    this.pairConn = gw;
    this.offs.push(
      gw.status.subscribe((s) => {
        if (this.pairConn !== gw) return;
        this.setConn('pair', s);
        if (s.state === 'connected') {
          if (s.hello?.auth?.status === 'pending') this.pairCode = null;
          this.dispatch({ type: 'hello', auth: s.hello?.auth ?? null, gatewayId: s.hello?.server?.gatewayId ?? null });
        } else if (s.state === 'unauthorized') {
          this.dispatch({ type: 'refused', code: s.errorCode ?? 'UNAUTHORIZED', message: s.error ?? '', reason: reasonOf(s) });
        }
      }),
      gw.on('device.pair.resolved', (p) => {
        if (this.pairConn !== gw) return;
        const tokens = p?.deviceTokens && typeof p.deviceTokens === 'object' ? (p.deviceTokens as Tokens) : null;
        this.dispatch({ type: 'resolved', decision: String(p?.decision ?? ''), deviceTokens: tokens });
      }),
    );
    gw.start();
  }

  private openRole(role: Role, tokens: Tokens): void {
    const node = role === 'node';
    const gw = this.client(
      {
        role,
        mode: node ? 'node' : 'ui',
        clientId: node ? 'atrium-phone' : 'atrium-ui',
        caps: node ? [...this.declares.caps] : [],
        commands: node ? [...this.declares.commands] : [],
        instanceId: this.opts.instanceId,
      },
      () => ({ deviceToken: this.current.pair.tokens[role] ?? tokens[role] }),
    );
    this.roleConns.set(role, gw);
    let greeted = false;
    let wasConnected = false;
    this.offs.push(
      gw.status.subscribe((s) => {
        if (this.roleConns.get(role) !== gw) return;
        this.setConn(role, s);
        if (s.state === 'connected') {
          wasConnected = true;
          if (!greeted) {
            greeted = true;
            this.dispatch({ type: 'hello', auth: s.hello?.auth ?? null, gatewayId: s.hello?.server?.gatewayId ?? null });
          }
        } else if (s.state === 'unauthorized' && wasConnected) {
          // A live connection closed with 4001 (token revoked, device removed): connect again once;
          // the handshake then says why (a token mismatch leads to a repair request).
          wasConnected = false;
          gw.reconnectNow();
        } else if (s.state === 'unauthorized') {
          this.dispatch({ type: 'refused', role, code: s.errorCode ?? 'UNAUTHORIZED', message: s.error ?? '', reason: reasonOf(s) });
        }
      }),
      gw.on('device.token.rotated', (p) => {
        if (typeof p?.deviceToken === 'string' && (p.role === 'operator' || p.role === 'node')) {
          this.dispatch({ type: 'rotated', role: p.role, deviceToken: p.deviceToken });
        }
      }),
    );
    for (const f of this.connListeners) f(role, gw);
    gw.start();
  }
}

function reasonOf(s: ConnStatus): string | null {
  const r = s.errorDetails?.reason;
  return typeof r === 'string' ? r : null;
}
