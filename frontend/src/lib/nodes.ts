// The desktop's Nodes panel (issue 16 item 11): pairing requests, paired devices, presence, exec
// asks. Shapes are the issue-16 contract's (device.pair.*, device.list, presence, node.*,
// exec.ask.*); this module reads them defensively and keeps the panel's state as a pure reducer.

export type Role = 'operator' | 'node';

/** device.pair.code's answer. */
export interface PairCode {
  code: string;
  display: string;
  /** Names the code in device.pair.code.locked ("" from an older gateway). */
  codeId: string;
  /** Wrong tries on the network that lock it (0: not said). */
  maxWrongTries: number;
  expiresAt: number;
  url: string;
  urls: string[];
  qrPng: string;
  gatewayId: string;
  fingerprint: string;
  fingerprintWords: string;
  /** Base64 SHA-256 of the certificate's public key (SPKI): what a browser flag or a pin takes. */
  spki: string;
  /** The gateway listens on loopback only: a phone cannot reach any of `urls` (issue 24 item 10). */
  loopbackOnly: boolean;
  note?: string;
}

/** A pending pairing request (device.pair.requested / device.pair.list). */
export interface PairRequest {
  requestId: string;
  deviceId: string;
  displayName: string;
  platform: string;
  roles: string[];
  commands: string[];
  caps: string[];
  remoteIp: string;
  /** Unix ms of the (last) submit. */
  createdAt: number;
  /** "repair": the key is already paired (it lost its token). */
  kind: 'new' | 'repair';
  /** A repair's device's memory scope now ("" for a new device). */
  scope: string;
}

/** A paired device (device.list). */
export interface PairedDevice {
  deviceId: string;
  displayName: string;
  platform: string;
  algorithm: string;
  roles: string[];
  commands: string[];
  caps: string[];
  createdAt: number;
  lastSeenAt: number;
  connected: boolean;
  /** Token state per role: "active" or "revoked" (a revoked device may ask to repair). */
  tokens: Record<string, string>;
  /** What it reaches in memory as an operator: "authenticated", "role:<name>" or "admin". */
  scope: string;
}

/** A presence entry (SPEC §7). */
export interface PresenceEntry {
  instanceId: string;
  host: string;
  ip: string;
  version: string;
  platform: string;
  mode: string;
  role: string;
  /** The roles of the instance's connections (one device's UI and node connections are one entry). */
  roles?: string[];
  deviceId: string;
  caps: string[];
  commands: string[];
  connected: boolean;
  lastInputSeconds: number | null;
  ts: number;
}

/** A node (node.list). */
export interface NodeInfo {
  nodeId: string;
  displayName: string;
  platform: string;
  caps: string[];
  commands: string[];
  connected: boolean;
  lastSeen: number;
}

/** exec.ask.requested. */
export interface ExecAsk {
  id: string;
  nodeId: string;
  displayName: string;
  command: string[];
  cwd: string;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
const obj = (v: unknown): Record<string, any> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, any>) : {});
/** Times come as Unix ms or RFC 3339 strings. */
const time = (v: unknown): number => {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && v) {
    const t = Date.parse(v);
    return Number.isNaN(t) ? 0 : t;
  }
  return 0;
};

export function toPairCode(v: unknown): PairCode | null {
  const o = obj(v);
  const code = str(o.code);
  if (!code) return null;
  const urls = strs(o.urls);
  const url = str(o.url) || urls[0] || '';
  return {
    code,
    display: str(o.display) || code,
    codeId: str(o.codeId),
    maxWrongTries: num(o.maxWrongTries),
    expiresAt: time(o.expiresAt),
    url,
    urls: urls.length ? urls : url ? [url] : [],
    qrPng: str(o.qrPng),
    gatewayId: str(o.gatewayId),
    fingerprint: str(o.fingerprint),
    fingerprintWords: str(o.fingerprintWords),
    spki: str(o.spki),
    loopbackOnly: o.loopbackOnly === true,
    note: str(o.note) || undefined,
  };
}

/** device.pair.code.locked: a setup code locked after wrong tries on the network (it never works again). */
export function toCodeLocked(v: unknown): { codeId: string; wrongTries: number } | null {
  const o = obj(v);
  const codeId = str(o.codeId);
  return codeId ? { codeId, wrongTries: num(o.wrongTries) } : null;
}

export function toPairRequest(v: unknown): PairRequest | null {
  const o = obj(v);
  const requestId = str(o.requestId) || str(o.id);
  if (!requestId) return null;
  return {
    requestId,
    deviceId: str(o.deviceId),
    displayName: str(o.displayName) || str(o.deviceId).slice(0, 12),
    platform: str(o.platform),
    roles: strs(o.roles),
    commands: strs(o.commands),
    caps: strs(o.caps),
    remoteIp: str(o.remoteIp) || str(o.remoteIP) || str(o.ip),
    createdAt: time(o.createdAt) || time(o.submittedAt) || time(o.ts),
    kind: o.kind === 'repair' || o.repair === true ? 'repair' : 'new',
    scope: str(o.scope),
  };
}

export function toPairedDevice(v: unknown): PairedDevice | null {
  const o = obj(v);
  const deviceId = str(o.deviceId);
  if (!deviceId) return null;
  return {
    deviceId,
    displayName: str(o.displayName) || deviceId.slice(0, 12),
    platform: str(o.platform),
    algorithm: str(o.algorithm),
    roles: strs(o.roles),
    commands: strs(o.commands),
    caps: strs(o.caps),
    createdAt: time(o.createdAt),
    lastSeenAt: time(o.lastSeenAt),
    connected: o.connected === true,
    tokens: Object.fromEntries(Object.entries(obj(o.tokens)).filter((e): e is [string, string] => typeof e[1] === 'string')),
    // A device listed without one (an older gateway) is shown as the safe default.
    scope: str(o.scope) || SCOPE_AUTHENTICATED,
  };
}

export function toPresence(v: unknown): PresenceEntry | null {
  const o = obj(v);
  const instanceId = str(o.instanceId) || str(o.connId);
  if (!instanceId) return null;
  return {
    instanceId,
    host: str(o.host),
    ip: str(o.ip),
    version: str(o.version),
    platform: str(o.platform),
    mode: str(o.mode),
    role: str(o.role),
    deviceId: str(o.deviceId),
    caps: strs(o.caps),
    commands: strs(o.commands),
    connected: o.connected !== false,
    lastInputSeconds: typeof o.lastInputSeconds === 'number' ? o.lastInputSeconds : null,
    ts: time(o.ts),
  };
}

export function toNode(v: unknown): NodeInfo | null {
  const o = obj(v);
  const nodeId = str(o.nodeId);
  if (!nodeId) return null;
  return {
    nodeId,
    displayName: str(o.displayName) || nodeId.slice(0, 12),
    platform: str(o.platform),
    caps: strs(o.caps),
    commands: strs(o.commands),
    connected: o.connected === true,
    lastSeen: time(o.lastSeen),
  };
}

export function toExecAsk(v: unknown): ExecAsk | null {
  const o = obj(v);
  const id = str(o.id);
  if (!id) return null;
  return { id, nodeId: str(o.nodeId), displayName: str(o.displayName) || str(o.nodeId), command: strs(o.command), cwd: str(o.cwd) };
}

const list = <T>(v: unknown, f: (x: unknown) => T | null): T[] => (Array.isArray(v) ? v.map(f).filter((x): x is T => x !== null) : []);

export interface NodesState {
  pending: PairRequest[];
  devices: PairedDevice[];
  presence: PresenceEntry[];
  nodes: NodeInfo[];
  asks: ExecAsk[];
}

export const initialNodes = (): NodesState => ({ pending: [], devices: [], presence: [], nodes: [], asks: [] });

export type NodesAction =
  | { type: 'pending'; payload: unknown } // device.pair.list
  | { type: 'requested'; payload: unknown } // device.pair.requested {request}
  | { type: 'resolved'; payload: unknown } // device.pair.resolved {requestId}
  | { type: 'devices'; payload: unknown } // device.list
  | { type: 'presence'; payload: unknown } // presence {entries} / hello-ok snapshot.presence
  | { type: 'nodes'; payload: unknown } // node.list
  | { type: 'ask'; payload: unknown } // exec.ask.requested
  | { type: 'asks'; payload: unknown } // exec.ask.list
  | { type: 'asked'; id: string }; // answered (by us or elsewhere)

export function reduceNodes(s: NodesState, a: NodesAction): NodesState {
  switch (a.type) {
    case 'pending':
      return { ...s, pending: list(obj(a.payload).pending, toPairRequest) };
    case 'requested': {
      const p = obj(a.payload);
      const r = toPairRequest(p.request ?? p);
      if (!r) return s;
      // One request per device: a resubmit (or a repair of the same key) replaces it.
      return { ...s, pending: [...s.pending.filter((x) => x.requestId !== r.requestId && x.deviceId !== r.deviceId), r] };
    }
    case 'resolved': {
      const id = str(obj(a.payload).requestId);
      return id ? { ...s, pending: s.pending.filter((x) => x.requestId !== id) } : s;
    }
    case 'devices':
      return { ...s, devices: list(obj(a.payload).devices, toPairedDevice) };
    case 'presence': {
      const p = a.payload;
      return { ...s, presence: list(Array.isArray(p) ? p : obj(p).entries, toPresence) };
    }
    case 'nodes':
      return { ...s, nodes: list(obj(a.payload).nodes, toNode) };
    case 'ask': {
      const x = toExecAsk(a.payload);
      return x && !s.asks.some((q) => q.id === x.id) ? { ...s, asks: [...s.asks, x] } : s;
    }
    case 'asks':
      return { ...s, asks: list(obj(a.payload).asks, toExecAsk) };
    case 'asked':
      return { ...s, asks: s.asks.filter((q) => q.id !== a.id) };
  }
}

/** device.pair.approve's params: the roles, the commands the person left ticked, and the memory scope chosen. */
export function approveParams(
  r: PairRequest,
  ticked: ReadonlySet<string>,
  scope: string = SCOPE_AUTHENTICATED,
): { requestId: string; roles: string[]; commands: string[]; scope: string } {
  return { requestId: r.requestId, roles: [...r.roles], commands: r.commands.filter((c) => ticked.has(c)), scope };
}

// Memory scopes of paired devices (issue 21; docs/PROTOCOL.md "Device scope"): what a phone reaches
// in memory. The default is what the ACL grants `authenticated`; a role scope acts as that role;
// admin ("everything, like this computer") only when the person ticks it.
export const SCOPE_AUTHENTICATED = 'authenticated';
export const SCOPE_ADMIN = 'admin';
const ROLE_PREFIX = 'role:';

/** The scope acting as role. */
export const roleScope = (role: string): string => ROLE_PREFIX + role;

/** The role of a role scope, else null. */
export function scopeRole(scope: string): string | null {
  return scope.startsWith(ROLE_PREFIX) && scope.length > ROLE_PREFIX.length ? scope.slice(ROLE_PREFIX.length) : null;
}

/** The roles a device may be scoped to, from roles.list: main first (the chat's own profile), each once. */
export function scopeRoles(rolesList: unknown): string[] {
  const out = ['main'];
  for (const r of Array.isArray(obj(rolesList).roles) ? obj(rolesList).roles : []) {
    const name = str(obj(r).role);
    if (name && !out.includes(name)) out.push(name);
  }
  return out;
}

/** What the scope picker shows: the select's value (never admin) and whether "everything" is ticked. */
export interface ScopeChoice {
  pick: string;
  everything: boolean;
}

/**
 * The picker's first state for a scope the device has (a repair, a paired device): its role or
 * "authenticated" in the select; admin is never pre-ticked — the person ticks it again.
 */
export function initialChoice(scope: string, roles: readonly string[]): ScopeChoice {
  const role = scopeRole(scope);
  return { pick: role !== null && roles.includes(role) ? scope : SCOPE_AUTHENTICATED, everything: false };
}

/** The scope a choice sends. */
export const chosenScope = (c: ScopeChoice): string => (c.everything ? SCOPE_ADMIN : c.pick);

export type ParsedParams = { ok: true; value: Record<string, unknown> } | { ok: false; error: string };

/** The invoke form's params: empty = {}, else a JSON object. */
export function parseInvokeParams(text: string): ParsedParams {
  const t = text.trim();
  if (!t) return { ok: true, value: {} };
  let v: unknown;
  try {
    v = JSON.parse(t);
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return { ok: false, error: 'params must be a JSON object' };
  return { ok: true, value: v as Record<string, unknown> };
}

/** Seconds since `at` (Unix ms), never negative. */
export function ageSeconds(at: number, now: number): number {
  return at > 0 ? Math.max(0, Math.floor((now - at) / 1000)) : 0;
}
