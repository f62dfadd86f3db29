// The gateway client: the only place in the UI that opens a WebSocket.
// Protocol: docs/PROTOCOL.md (frames, handshake, error codes).
import { writable, type Readable } from 'svelte/store';
import { CLIENT_ID, PROTOCOL_VERSION, UI_VERSION } from './version';
import { uuid as defaultUuid } from './util';

export type ConnState = 'connecting' | 'connected' | 'disconnected' | 'unauthorized';

export interface HelloOk {
  type?: string;
  protocol: number;
  server?: { version?: string; connId?: string; gatewayId?: string };
  /** sideEffects: methods that take an idempotencyKey (required); operatorOnly: methods node connections may not call; callable: the methods this connection may call. */
  features?: { methods?: string[]; events?: string[]; sideEffects?: string[]; operatorOnly?: string[]; callable?: string[] };
  snapshot?: { presence?: unknown[]; profiles?: unknown[] };
  policy?: { maxPayload?: number; maxBufferedBytes?: number; tickIntervalMs?: number };
  /** Who this connection is (issue 16): status "operator" (the token), "paired" (a device token) or "pending" (asked to pair). */
  auth?: {
    role?: string;
    deviceId?: string;
    status?: string;
    requestId?: string;
    deviceTokens?: { operator?: string; node?: string } | null;
    gatewayId?: string;
  };
}

export interface ConnStatus {
  state: ConnState;
  /** Last error (close reason, handshake refusal, ...); null after a successful handshake. */
  error: string | null;
  /** The protocol error code of a handshake refusal (UNAUTHORIZED, NOT_PAIRED, FORBIDDEN), else absent. */
  errorCode?: string | null;
  /** error.details of that refusal (e.g. {reason: "device_token_mismatch", repairable: true}). */
  errorDetails?: Record<string, unknown> | null;
  /** Failed attempts since the last successful handshake. */
  attempt: number;
  /** Delay of the scheduled reconnect, when one is scheduled. */
  retryInMs: number | null;
  /** When the scheduled reconnect fires (Date.now() based), or null. */
  retryAt?: number | null;
  hello: HelloOk | null;
}

export type ErrorCode =
  | 'INVALID_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'NOT_PAIRED'
  | 'CONFLICT'
  | 'UNAVAILABLE'
  | 'TIMEOUT'
  | 'PAYLOAD_TOO_LARGE'
  | 'INTERNAL'
  | (string & {});

/** A failed request: `code` is one of the protocol's error codes. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  /** error.details when the gateway sent some (e.g. {reason: "device_token_mismatch"}). */
  readonly details: Record<string, unknown> | null;
  constructor(code: ErrorCode, message: string, retryable = false, details: Record<string, unknown> | null = null) {
    super(message);
    this.name = 'GatewayError';
    this.code = code;
    this.retryable = retryable;
    this.details = details;
  }
}

/** The subset of the browser WebSocket the client uses (so tests can script one). */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketCtor = new (url: string) => WebSocketLike;

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  factor: number;
  /** Relative jitter: the delay is spread uniformly over ±jitter·delay. */
  jitter: number;
}
export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 15_000, factor: 2, jitter: 0.25 };

/** Delay before reconnect attempt number `attempt` (0-based): capped exponential backoff with jitter. */
export function backoffDelay(attempt: number, opts: BackoffOptions = DEFAULT_BACKOFF, random: () => number = Math.random): number {
  const exp = opts.initialMs * Math.pow(opts.factor, Math.max(0, attempt));
  const base = Math.min(opts.maxMs, exp);
  const jittered = base + base * opts.jitter * (random() * 2 - 1);
  return Math.round(Math.max(0, Math.min(opts.maxMs, jittered)));
}

/**
 * Methods with side effects: the gateway requires an idempotencyKey on each call (SPEC §3), and
 * request() adds a fresh one when the caller did not pass one (a caller that retries the same action
 * passes its own key again). The connected gateway's list (hello-ok features.sideEffects) wins; this
 * one is for a gateway that does not send it.
 */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set([
  'agent.permission.answer',
  'canvas.a2ui.push',
  'canvas.a2ui.reset',
  'canvas.action',
  'canvas.eval',
  'canvas.hide',
  'canvas.navigate',
  'canvas.present',
  'canvas.rendered',
  'canvas.snapshot',
  'chat.cancel',
  'chat.send',
  'collab.accept',
  'collab.complete',
  'collab.request',
  'collab.write',
  'config.patch',
  'conflicts.resolve',
  'memory.import',
  'memory.note',
  'memory.promote',
  'memory.sync',
  'memory.write',
  'message.delete',
  'profiles.create',
  'profiles.spawn',
  'profiles.stop',
  'sessions.archive',
  'sessions.create',
  'setup.choose',
]);

export interface GatewayOptions {
  url: string;
  token?: string | null;
  instanceId?: string;
  platform?: string;
  version?: string;
  WebSocket?: WebSocketCtor;
  backoff?: Partial<BackoffOptions>;
  random?: () => number;
  uuid?: () => string;
  /** Default per-request timeout. */
  requestTimeoutMs?: number;
  /** How long to wait for connect.challenge + hello-ok after the socket is created. */
  handshakeTimeoutMs?: number;
  /** connect params (default: the operator UI): role, client.id / mode / displayName, declared caps and commands. */
  role?: string;
  /** Every role the device asks for when pairing (connect params.roles); absent: [role]. */
  roles?: string[];
  clientId?: string;
  mode?: string;
  displayName?: string;
  caps?: string[];
  commands?: string[];
  /**
   * Completes the connect params once the challenge is in (a device adds `auth` and its signed
   * `device` proof over the challenge's nonce). A rejection closes the attempt like a refused handshake.
   */
  prepareConnect?: (params: ConnectParams, challenge: { nonce: string; ts?: number }) => Promise<ConnectParams>;
}

/** The connect request's params (docs/PROTOCOL.md "Handshake"). */
export interface ConnectParams {
  minProtocol: number;
  maxProtocol: number;
  client: { id: string; version: string; platform: string; mode: string; instanceId: string; displayName?: string };
  role: string;
  roles?: string[];
  scopes: string[];
  caps: string[];
  commands: string[];
  permissions: Record<string, unknown>;
  auth: { token?: string; deviceToken?: string; setupCode?: string };
  device?: unknown;
}

export interface RequestOptions {
  timeoutMs?: number;
}

export type EventHandler = (payload: any, event: string, frameSeq?: number) => void;

interface Pending {
  method: string;
  resolve: (payload: any) => void;
  reject: (err: GatewayError) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** Close code the server uses after refusing the token (docs/PROTOCOL.md). */
export const CLOSE_UNAUTHORIZED = 4001;

const textEncoder = typeof TextEncoder !== 'undefined' ? new TextEncoder() : null;
function byteLength(s: string): number {
  return textEncoder ? textEncoder.encode(s).length : s.length;
}

export class GatewayClient {
  readonly status: Readable<ConnStatus>;

  private readonly _status = writable<ConnStatus>({
    state: 'disconnected',
    error: null,
    attempt: 0,
    retryInMs: null,
    hello: null,
  });
  private current: ConnStatus;
  private url: string;
  private token: string | null;
  private readonly opts: GatewayOptions;
  private readonly backoff: BackoffOptions;
  private readonly random: () => number;
  private readonly uuid: () => string;
  private readonly WS: WebSocketCtor;

  private ws: WebSocketLike | null = null;
  private connectReqId: string | null = null;
  private handshaken = false;
  private running = false;
  private unauthorized = false;
  private attempt = 0;
  private maxPayload = 0;
  private tickIntervalMs = 30_000;

  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private handshakeTimer: ReturnType<typeof setTimeout> | null = null;
  private watchdogTimer: ReturnType<typeof setTimeout> | null = null;

  private readonly pending = new Map<string, Pending>();
  private readonly handlers = new Map<string, Set<EventHandler>>();

  constructor(opts: GatewayOptions) {
    this.opts = opts;
    this.url = opts.url;
    this.token = opts.token ?? null;
    this.backoff = { ...DEFAULT_BACKOFF, ...(opts.backoff ?? {}) };
    this.random = opts.random ?? Math.random;
    this.uuid = opts.uuid ?? defaultUuid;
    const ctor = opts.WebSocket ?? (globalThis.WebSocket as unknown as WebSocketCtor | undefined);
    if (!ctor) throw new Error('WebSocket is not available');
    this.WS = ctor;
    this.current = { state: 'disconnected', error: null, attempt: 0, retryInMs: null, hello: null };
    this.status = { subscribe: this._status.subscribe };
  }

  /** Current status (same value the `status` store holds). */
  get state(): ConnStatus {
    return this.current;
  }

  /** Hello payload of the current connection, or null. */
  get hello(): HelloOk | null {
    return this.current.hello;
  }

  /**
   * Whether the connected gateway serves `method` (hello-ok features.methods). A gateway that lists
   * no methods is assumed to serve it: the call then fails with NOT_FOUND if it does not (see
   * isUnknownMethod). False while not connected.
   */
  supports(method: string): boolean {
    const f = this.current.hello?.features;
    if (this.current.state !== 'connected') return false;
    // callable: what this connection's principal may call (a paired phone may not, e.g., admit devices).
    if (Array.isArray(f?.callable)) return f.callable.includes(method);
    const methods = f?.methods;
    return !Array.isArray(methods) || methods.length === 0 || methods.includes(method);
  }

  /** Whether `method` has side effects (and so takes an idempotencyKey): hello-ok features.sideEffects, else IDEMPOTENT_METHODS. */
  hasSideEffects(method: string): boolean {
    const listed = this.current.hello?.features?.sideEffects;
    return Array.isArray(listed) ? listed.includes(method) : IDEMPOTENT_METHODS.has(method);
  }

  /** Starts connecting (and keeps reconnecting until stop() or an UNAUTHORIZED refusal). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.unauthorized = false;
    this.open();
  }

  /** Closes the connection and stops reconnecting. */
  stop(): void {
    this.running = false;
    this.clearReconnect();
    this.dropSocket(1000, 'client stopped', false);
    this.setStatus({ state: 'disconnected', retryInMs: null });
  }

  setToken(token: string | null): void {
    this.token = token && token.trim() ? token.trim() : null;
  }

  setUrl(url: string): void {
    this.url = url;
  }

  /** Reconnects now (resets the backoff); also leaves the unauthorized state. */
  reconnectNow(): void {
    this.running = true;
    this.unauthorized = false;
    this.attempt = 0;
    this.clearReconnect();
    if (this.ws && this.handshaken) return;
    this.dropSocket(1000, 'reconnecting', false);
    this.open();
  }

  /** Subscribes to a server event ("*" receives every event). Returns the unsubscribe function. */
  on(event: string, handler: EventHandler): () => void {
    let set = this.handlers.get(event);
    if (!set) {
      set = new Set();
      this.handlers.set(event, set);
    }
    set.add(handler);
    return () => {
      const s = this.handlers.get(event);
      if (!s) return;
      s.delete(handler);
      if (s.size === 0) this.handlers.delete(event);
    };
  }

  /** Sends a request; resolves with the response payload or rejects with a GatewayError. */
  request<T = any>(method: string, params: Record<string, unknown> = {}, opts: RequestOptions = {}): Promise<T> {
    const ws = this.ws;
    if (!ws || !this.handshaken) {
      return Promise.reject(new GatewayError('UNAVAILABLE', 'not connected to the gateway', true));
    }
    const p: Record<string, unknown> = { ...params };
    if (this.hasSideEffects(method) && (p.idempotencyKey === undefined || p.idempotencyKey === null || p.idempotencyKey === '')) {
      p.idempotencyKey = this.uuid();
    }
    const id = this.uuid();
    const frame = JSON.stringify({ type: 'req', id, method, params: p });
    if (this.maxPayload > 0) {
      const size = byteLength(frame);
      if (size > this.maxPayload) {
        return Promise.reject(
          new GatewayError('PAYLOAD_TOO_LARGE', `request is ${size} bytes; the gateway accepts at most ${this.maxPayload}`),
        );
      }
    }
    const timeoutMs = opts.timeoutMs ?? this.opts.requestTimeoutMs ?? 30_000;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.pending.delete(id)) {
          reject(new GatewayError('TIMEOUT', `${method} timed out after ${timeoutMs} ms`, true));
        }
      }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      try {
        ws.send(frame);
      } catch (e) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new GatewayError('UNAVAILABLE', `send failed: ${e instanceof Error ? e.message : String(e)}`, true));
      }
    });
  }

  // ---- internals ----

  private setStatus(patch: Partial<ConnStatus>): void {
    this.current = { ...this.current, ...patch };
    this._status.set(this.current);
  }

  private open(): void {
    this.clearReconnect();
    this.handshaken = false;
    this.connectReqId = null;
    let ws: WebSocketLike;
    try {
      ws = new this.WS(this.url);
    } catch (e) {
      this.ws = null;
      this.afterClose(`cannot open ${this.url}: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    this.ws = ws;
    this.setStatus({ state: 'connecting', retryInMs: null, hello: null });
    ws.onopen = () => {
      /* wait for connect.challenge */
    };
    ws.onerror = () => {
      /* a close event follows */
    };
    ws.onmessage = (ev) => {
      if (this.ws !== ws) return;
      this.onFrame(ws, ev.data);
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.detach(ws);
      this.ws = null;
      const code = typeof ev?.code === 'number' ? ev.code : 1006;
      const reason = typeof ev?.reason === 'string' && ev.reason ? ev.reason : '';
      if (code === CLOSE_UNAUTHORIZED) {
        this.enterUnauthorized(reason || this.current.error || 'the gateway refused the token');
        return;
      }
      this.afterClose(reason ? `connection closed (${code}): ${reason}` : `connection closed (${code})`);
    };
    const hsMs = this.opts.handshakeTimeoutMs ?? 10_000;
    this.handshakeTimer = setTimeout(() => {
      this.handshakeTimer = null;
      if (this.ws === ws && !this.handshaken) {
        this.dropSocket(4000, 'handshake timed out', true);
      }
    }, hsMs);
  }

  private onFrame(ws: WebSocketLike, data: unknown): void {
    if (typeof data !== 'string') return;
    let frame: any;
    try {
      frame = JSON.parse(data);
    } catch {
      console.warn('atrium gateway: ignoring a frame that is not JSON');
      return;
    }
    if (!frame || typeof frame !== 'object') return;
    this.armWatchdog();
    if (frame.type === 'event') {
      const name = typeof frame.event === 'string' ? frame.event : '';
      if (!this.handshaken) {
        if (name === 'connect.challenge' && this.connectReqId === null) this.sendConnect(ws, frame.payload ?? {});
        return;
      }
      this.emit(name, frame.payload ?? {}, typeof frame.seq === 'number' ? frame.seq : undefined);
      return;
    }
    if (frame.type === 'res') {
      const id = typeof frame.id === 'string' ? frame.id : '';
      if (this.connectReqId !== null && id === this.connectReqId) {
        this.onHello(ws, frame);
        return;
      }
      const p = this.pending.get(id);
      if (!p) {
        if (frame.ok === false) console.warn('atrium gateway: unmatched error response', frame.error);
        return;
      }
      this.pending.delete(id);
      clearTimeout(p.timer);
      if (frame.ok === true) p.resolve(frame.payload ?? {});
      else p.reject(toGatewayError(frame.error));
    }
  }

  private sendConnect(ws: WebSocketLike, challenge: { nonce?: unknown; ts?: unknown }): void {
    const id = this.uuid();
    this.connectReqId = id;
    const o = this.opts;
    const params: ConnectParams = {
      minProtocol: PROTOCOL_VERSION,
      maxProtocol: PROTOCOL_VERSION,
      client: {
        id: o.clientId ?? CLIENT_ID,
        version: o.version ?? UI_VERSION,
        platform: o.platform ?? detectPlatform(),
        mode: o.mode ?? 'ui',
        instanceId: o.instanceId ?? this.uuid(),
        ...(o.displayName ? { displayName: o.displayName } : {}),
      },
      role: o.role ?? 'operator',
      ...(o.roles ? { roles: [...o.roles] } : {}),
      scopes: [],
      caps: [...(o.caps ?? [])],
      commands: [...(o.commands ?? [])],
      permissions: {},
      auth: this.token ? { token: this.token } : {},
    };
    const send = (p: ConnectParams) => {
      if (this.ws !== ws || this.connectReqId !== id) return; // the attempt was dropped meanwhile
      try {
        ws.send(JSON.stringify({ type: 'req', id, method: 'connect', params: p }));
      } catch (e) {
        this.dropSocket(4000, `send failed: ${e instanceof Error ? e.message : String(e)}`, true);
      }
    };
    if (!o.prepareConnect) {
      send(params);
      return;
    }
    const nonce = typeof challenge.nonce === 'string' ? challenge.nonce : '';
    o.prepareConnect(params, { nonce, ts: typeof challenge.ts === 'number' ? challenge.ts : undefined }).then(send, (e) => {
      if (this.ws !== ws || this.connectReqId !== id) return;
      this.dropSocket(4000, `cannot sign the connect request: ${e instanceof Error ? e.message : String(e)}`, true);
    });
  }

  private onHello(ws: WebSocketLike, frame: any): void {
    this.connectReqId = null;
    if (frame.ok !== true) {
      const err = toGatewayError(frame.error);
      // Retrying cannot help these: a refused token or proof, a device that is not paired (a spent
      // code), a credential this address may not use. The state says why; start()/reconnectNow() retry.
      if (err.code === 'UNAUTHORIZED' || err.code === 'NOT_PAIRED' || err.code === 'FORBIDDEN') {
        this.detach(ws);
        this.ws = null;
        try {
          ws.close(1000, 'unauthorized');
        } catch {
          /* ignore */
        }
        this.enterUnauthorized(err.message, err.code, err.details);
        return;
      }
      this.dropSocket(4000, `handshake refused: ${err.code}: ${err.message}`, true);
      return;
    }
    const hello = (frame.payload ?? {}) as HelloOk;
    this.handshaken = true;
    this.attempt = 0;
    this.clearHandshakeTimer();
    this.maxPayload = typeof hello.policy?.maxPayload === 'number' ? hello.policy.maxPayload : 0;
    this.tickIntervalMs =
      typeof hello.policy?.tickIntervalMs === 'number' && hello.policy.tickIntervalMs > 0 ? hello.policy.tickIntervalMs : 30_000;
    this.armWatchdog();
    this.setStatus({ state: 'connected', error: null, errorCode: null, errorDetails: null, attempt: 0, retryInMs: null, hello });
  }

  private enterUnauthorized(message: string, code: string | null = null, details: Record<string, unknown> | null = null): void {
    this.clearTimers();
    this.unauthorized = true;
    this.handshaken = false;
    this.connectReqId = null;
    this.rejectAll('UNAVAILABLE', 'unauthorized');
    // A close 4001 right after a refusal keeps the refusal's code and details.
    const keep = code === null && this.current.state === 'unauthorized';
    this.setStatus({
      state: 'unauthorized',
      error: message || 'unauthorized',
      errorCode: keep ? this.current.errorCode : (code ?? 'UNAUTHORIZED'),
      errorDetails: keep ? this.current.errorDetails : details,
      retryInMs: null,
      hello: null,
    });
  }

  /** Closes the current socket ourselves (handlers detached) and runs the close logic. */
  private dropSocket(code: number, reason: string, reconnect: boolean): void {
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      this.detach(ws);
      try {
        ws.close(code, reason);
      } catch {
        /* ignore */
      }
    }
    this.handshaken = false;
    this.connectReqId = null;
    if (reconnect) this.afterClose(reason);
    else {
      this.clearTimers();
      this.rejectAll('UNAVAILABLE', reason);
    }
  }

  private afterClose(reason: string): void {
    this.handshaken = false;
    this.connectReqId = null;
    this.clearHandshakeTimer();
    this.clearWatchdog();
    this.rejectAll('UNAVAILABLE', reason);
    if (!this.running || this.unauthorized) {
      this.setStatus({ state: this.unauthorized ? 'unauthorized' : 'disconnected', error: reason, retryInMs: null, hello: null });
      return;
    }
    const delay = backoffDelay(this.attempt, this.backoff, this.random);
    this.attempt += 1;
    this.setStatus({ state: 'disconnected', error: reason, attempt: this.attempt, retryInMs: delay, retryAt: Date.now() + delay, hello: null });
    this.clearReconnect();
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (this.running && !this.unauthorized) this.open();
    }, delay);
  }

  private rejectAll(code: ErrorCode, reason: string): void {
    if (this.pending.size === 0) return;
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) {
      clearTimeout(p.timer);
      p.reject(new GatewayError(code, `${p.method}: connection lost (${reason})`, true));
    }
  }

  private emit(event: string, payload: any, seq?: number): void {
    const deliver = (set: Set<EventHandler> | undefined) => {
      if (!set) return;
      for (const h of [...set]) {
        try {
          h(payload, event, seq);
        } catch (e) {
          console.error(`atrium gateway: handler for ${event} failed`, e);
        }
      }
    };
    deliver(this.handlers.get(event));
    deliver(this.handlers.get('*'));
  }

  private detach(ws: WebSocketLike): void {
    ws.onopen = null;
    ws.onmessage = null;
    ws.onclose = null;
    ws.onerror = null;
  }

  /** A connection that stays silent for two ticks (plus slack) is considered dead. */
  private armWatchdog(): void {
    if (!this.handshaken) return;
    this.clearWatchdog();
    const ws = this.ws;
    this.watchdogTimer = setTimeout(() => {
      this.watchdogTimer = null;
      if (this.ws === ws && ws) this.dropSocket(4000, 'no data from the gateway (heartbeat missed)', true);
    }, this.tickIntervalMs * 2 + 5_000);
  }

  private clearReconnect(): void {
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
  }
  private clearHandshakeTimer(): void {
    if (this.handshakeTimer !== null) clearTimeout(this.handshakeTimer);
    this.handshakeTimer = null;
  }
  private clearWatchdog(): void {
    if (this.watchdogTimer !== null) clearTimeout(this.watchdogTimer);
    this.watchdogTimer = null;
  }
  private clearTimers(): void {
    this.clearReconnect();
    this.clearHandshakeTimer();
    this.clearWatchdog();
  }
}

/** True for the gateway's answer to a method it does not serve (NOT_FOUND "unknown method …"). */
export function isUnknownMethod(err: unknown): boolean {
  return err instanceof GatewayError && err.code === 'NOT_FOUND' && /unknown method/i.test(err.message);
}

export function toGatewayError(error: unknown): GatewayError {
  if (error && typeof error === 'object') {
    const e = error as { code?: unknown; message?: unknown; retryable?: unknown; details?: unknown };
    const code = typeof e.code === 'string' && e.code ? e.code : 'INTERNAL';
    const message = typeof e.message === 'string' && e.message ? e.message : code;
    const details = e.details && typeof e.details === 'object' && !Array.isArray(e.details) ? (e.details as Record<string, unknown>) : null;
    return new GatewayError(code, message, e.retryable === true, details);
  }
  return new GatewayError('INTERNAL', typeof error === 'string' && error ? error : 'request failed');
}

function detectPlatform(): string {
  const nav = (globalThis as { navigator?: Navigator & { userAgentData?: { platform?: string } } }).navigator;
  return nav?.userAgentData?.platform || nav?.platform || 'web';
}
