// Pairing a phone (the /pair page, issue 16): what the QR code's URL carries, the setup code's
// normal form, the fingerprint words, and the pairing state machine (a pure reducer: the page's
// controller, lib/phone.ts, runs the effects it asks for).

/** What the QR code's URL carries in its fragment: /pair#c=<code>&g=<gatewayId>&f=<fingerprint hex>. */
export interface PairFragment {
  /** The setup code, normalized (8 Crockford base32 characters). */
  code: string;
  /** The gateway's id: 64 lowercase hex characters. */
  gatewayId: string;
  /** SHA-256 of the gateway's TLS certificate, 64 lowercase hex characters ("" on plain loopback HTTP). */
  fingerprint: string;
}

export type FragmentResult = { ok: true; value: PairFragment } | { ok: false; error: 'none' | 'code' | 'gateway' | 'fingerprint' };

const CODE_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
export const CODE_LEN = 8;
const HEX64 = /^[0-9a-f]{64}$/;

/**
 * A typed or scanned setup code in its normal form (backend/pairing NormalizeCode): upper case,
 * spaces and dashes dropped, O read as 0, I and L as 1; null unless 8 characters of the alphabet.
 */
export function normalizeCode(typed: string): string | null {
  let out = '';
  for (let ch of typed.toUpperCase()) {
    if (ch === ' ' || ch === '-' || ch === '\t') continue;
    if (ch === 'O') ch = '0';
    else if (ch === 'I' || ch === 'L') ch = '1';
    if (!CODE_ALPHABET.includes(ch)) return null;
    out += ch;
  }
  return out.length === CODE_LEN ? out : null;
}

/** "XXXX-XXXX" for a normalized code. */
export function displayCode(code: string): string {
  return code.length === CODE_LEN ? `${code.slice(0, 4)}-${code.slice(4)}` : code;
}

/**
 * Reads the pairing fragment ("#c=…&g=…&f=…"). An empty fragment is error "none". The fingerprint
 * may be absent only when requireFingerprint is false: a page on plain loopback HTTP (a gateway bound
 * to loopback has no certificate, and the browser's own connection is the trust there).
 */
export function parsePairFragment(hash: string, requireFingerprint = true): FragmentResult {
  const raw = hash.startsWith('#') ? hash.slice(1) : hash;
  if (!raw) return { ok: false, error: 'none' };
  const p = new URLSearchParams(raw);
  if (!p.has('c') && !p.has('g') && !p.has('f')) return { ok: false, error: 'none' };
  const code = normalizeCode(p.get('c') ?? '');
  if (!code) return { ok: false, error: 'code' };
  const gatewayId = (p.get('g') ?? '').trim().toLowerCase();
  if (!HEX64.test(gatewayId)) return { ok: false, error: 'gateway' };
  const fingerprint = (p.get('f') ?? '').trim().toLowerCase().replace(/:/g, '');
  if (!HEX64.test(fingerprint) && (requireFingerprint || fingerprint !== '')) return { ok: false, error: 'fingerprint' };
  return { ok: true, value: { code, gatewayId, fingerprint } };
}

const PQ_CONSONANTS = 'bdfghjklmnprstvz';
const PQ_VOWELS = 'aiou';

function proquint(x: number): string {
  return PQ_CONSONANTS[(x >> 12) & 15] + PQ_VOWELS[(x >> 10) & 3] + PQ_CONSONANTS[(x >> 6) & 15] + PQ_VOWELS[(x >> 4) & 3] + PQ_CONSONANTS[x & 15];
}

/**
 * The fingerprint as the words the desktop shows (backend/gwid FingerprintWords): the first 64 bits
 * as four proquints, e.g. "lusab babad gutih tugad". "" for a fingerprint that is not hex.
 */
export function fingerprintWords(hex: string): string {
  const h = hex.toLowerCase().replace(/:/g, '');
  if (!/^[0-9a-f]{16,}$/.test(h)) return '';
  const words: string[] = [];
  for (let i = 0; i < 4; i++) words.push(proquint(parseInt(h.slice(4 * i, 4 * i + 4), 16)));
  return words.join(' ');
}

/** The v2 payload's token field (contract): deviceToken, else the normalized setup code, else the operator token, else "". */
export function connectToken(auth: { deviceToken?: string | null; setupCode?: string | null; token?: string | null }): string {
  if (auth.deviceToken) return auth.deviceToken;
  if (auth.setupCode) return normalizeCode(auth.setupCode) ?? auth.setupCode;
  return auth.token ?? '';
}

// ---- the state machine ----

export type Role = 'operator' | 'node';
export type Tokens = Partial<Record<Role, string>>;

/** What the page keeps in IndexedDB besides its key (one gateway per origin). */
export interface StoredPairing {
  gatewayId: string;
  fingerprint: string;
  tokens: Tokens;
}

export type PairPhase =
  /** Loading the key and what is stored. */
  | { phase: 'loading' }
  /** Nothing to go on: no code in the URL, nothing stored. */
  | { phase: 'need-code'; error?: 'code' | 'gateway' | 'fingerprint' }
  /** Connecting with the setup code (pair), with the proof alone (repair) or with tokens (paired). */
  | { phase: 'connecting'; via: 'code' | 'repair' | 'tokens' }
  /** The request is waiting for the person at the desktop. */
  | { phase: 'pending'; requestId: string | null; repair: boolean }
  /** Admitted: connected (or connecting) with the device token(s). */
  | { phase: 'paired'; roles: Role[] }
  | { phase: 'rejected' }
  | { phase: 'expired' }
  /** The gateway refused (a used, expired or locked code, guessing limit, another gateway …); reason: error.details.reason. */
  | { phase: 'failed'; code: string; message: string; reason?: string };

export interface PairState {
  phase: PairPhase;
  gatewayId: string | null;
  fingerprint: string | null;
  /** The setup code from the URL, until it was used for a request. */
  code: string | null;
  tokens: Tokens;
}

export type PairEvent =
  | { type: 'loaded'; stored: StoredPairing | null; fragment: FragmentResult }
  /** hello-ok of the pairing connection (code or repair). */
  | { type: 'hello'; auth: HelloAuth | null; gatewayId?: string | null }
  /** device.pair.resolved on the pairing connection. */
  | { type: 'resolved'; decision: string; deviceTokens?: Tokens | null }
  /** A connection was refused at the handshake. role: which paired connection (absent: the pairing connection). */
  | { type: 'refused'; code: string; message: string; reason?: string | null; role?: Role }
  /** device.token.rotated: a new token for a role. */
  | { type: 'rotated'; role: Role; deviceToken: string }
  /** The person asks to pair again (after rejected / expired / failed). */
  | { type: 'retry' };

/** hello-ok.auth (contract). */
export interface HelloAuth {
  role?: string;
  deviceId?: string;
  status?: 'operator' | 'paired' | 'pending' | string;
  requestId?: string;
  deviceTokens?: Tokens | null;
  gatewayId?: string;
}

export type PairEffect =
  /** Open the pairing connection: with the setup code, or with the proof alone (repair). */
  | { type: 'connect-pair'; setupCode: string | null }
  /** Close the pairing connection and open one connection per role with its token. */
  | { type: 'connect-paired'; tokens: Tokens }
  /** Close every connection. */
  | { type: 'disconnect' }
  /** Persist gatewayId, fingerprint and tokens. */
  | { type: 'save'; stored: StoredPairing };

export interface Step {
  state: PairState;
  effects: PairEffect[];
}

export const initialPairState: PairState = { phase: { phase: 'loading' }, gatewayId: null, fingerprint: null, code: null, tokens: {} };

function rolesOf(tokens: Tokens): Role[] {
  return (['operator', 'node'] as Role[]).filter((r) => !!tokens[r]);
}

function save(s: PairState): PairEffect {
  return { type: 'save', stored: { gatewayId: s.gatewayId ?? '', fingerprint: s.fingerprint ?? '', tokens: { ...s.tokens } } };
}

function admitted(s: PairState, tokens: Tokens): Step {
  const merged: Tokens = { ...s.tokens, ...tokens };
  const next: PairState = { ...s, code: null, tokens: merged, phase: { phase: 'paired', roles: rolesOf(merged) } };
  return { state: next, effects: [save(next), { type: 'connect-paired', tokens: merged }] };
}

/**
 * The pairing state machine. It never forgets the key (the key is not part of it) and on a token
 * mismatch drops only that token, then asks again with its proof (a repair request for a known key).
 */
export function pairStep(s: PairState, ev: PairEvent): Step {
  switch (ev.type) {
    case 'loaded': {
      const stored = ev.stored && ev.stored.gatewayId ? ev.stored : null;
      const frag = ev.fragment.ok ? ev.fragment.value : null;
      // A code for another gateway than the stored one (a new gateway on this origin): start over.
      if (frag && (!stored || stored.gatewayId !== frag.gatewayId || rolesOf(stored.tokens).length === 0)) {
        const next: PairState = { phase: { phase: 'connecting', via: 'code' }, gatewayId: frag.gatewayId, fingerprint: frag.fingerprint, code: frag.code, tokens: {} };
        return { state: next, effects: [{ type: 'connect-pair', setupCode: frag.code }] };
      }
      if (stored && rolesOf(stored.tokens).length > 0) {
        const next: PairState = { phase: { phase: 'connecting', via: 'tokens' }, gatewayId: stored.gatewayId, fingerprint: stored.fingerprint, code: null, tokens: { ...stored.tokens } };
        return { state: next, effects: [{ type: 'connect-paired', tokens: next.tokens }] };
      }
      if (stored) {
        // Known gateway, no token left (dropped after a mismatch): ask again with the proof alone.
        const next: PairState = { phase: { phase: 'connecting', via: 'repair' }, gatewayId: stored.gatewayId, fingerprint: stored.fingerprint, code: null, tokens: {} };
        return { state: next, effects: [{ type: 'connect-pair', setupCode: null }] };
      }
      const error = ev.fragment.ok || ev.fragment.error === 'none' ? undefined : ev.fragment.error;
      return { state: { ...s, phase: { phase: 'need-code', error } }, effects: [] };
    }
    case 'hello': {
      const a = ev.auth ?? {};
      const gw = ev.gatewayId || a.gatewayId;
      if (gw && s.gatewayId && gw !== s.gatewayId) {
        return {
          state: { ...s, phase: { phase: 'failed', code: 'GATEWAY_MISMATCH', message: `this page is served by gateway ${gw.slice(0, 12)}…, the code is for ${s.gatewayId.slice(0, 12)}…` } },
          effects: [{ type: 'disconnect' }],
        };
      }
      if (a.deviceTokens && rolesOf(a.deviceTokens).length > 0) return admitted(s, a.deviceTokens);
      if (a.status === 'pending') {
        const repair = s.phase.phase === 'connecting' && s.phase.via === 'repair';
        // The code is spent once the request exists; the gateway lets the same key retry within a minute.
        const next: PairState = { ...s, phase: { phase: 'pending', requestId: a.requestId ?? null, repair } };
        return { state: next, effects: [save(next)] };
      }
      if (s.phase.phase === 'connecting' && s.phase.via === 'tokens') {
        return { state: { ...s, phase: { phase: 'paired', roles: rolesOf(s.tokens) } }, effects: [] };
      }
      return { state: s, effects: [] };
    }
    case 'resolved': {
      if (ev.decision === 'approved') {
        if (ev.deviceTokens && rolesOf(ev.deviceTokens).length > 0) return admitted(s, ev.deviceTokens);
        // Approved but the tokens did not come with the event: reconnect with the proof, hello-ok delivers them.
        return { state: { ...s, phase: { phase: 'connecting', via: 'repair' } }, effects: [{ type: 'connect-pair', setupCode: null }] };
      }
      const phase: PairPhase = ev.decision === 'rejected' ? { phase: 'rejected' } : { phase: 'expired' };
      return { state: { ...s, code: null, phase }, effects: [{ type: 'disconnect' }] };
    }
    case 'refused': {
      if (ev.reason === 'device_token_mismatch') {
        // Drop only the refused token (all of them when the role is unknown), never the key, and ask
        // again with the proof alone: a repair request for a known key, approved at the desktop.
        const tokens: Tokens = { ...s.tokens };
        if (ev.role) delete tokens[ev.role];
        else for (const r of rolesOf(tokens)) delete tokens[r];
        const next: PairState = { ...s, tokens, phase: { phase: 'connecting', via: 'repair' } };
        return { state: next, effects: [save(next), { type: 'connect-pair', setupCode: null }] };
      }
      // A spent, expired, locked or wrong code is not offered again (retry then asks with the proof
      // alone); after a guessing limit (rate_limited) the same code may be tried later.
      const spent = ev.code === 'NOT_PAIRED' || ['code_used', 'code_expired', 'code_invalid', 'code_locked'].includes(ev.reason ?? '');
      const code = s.phase.phase === 'connecting' && s.phase.via === 'code' && spent ? null : s.code;
      const failed: PairPhase = { phase: 'failed', code: ev.code, message: ev.message, ...(ev.reason ? { reason: ev.reason } : {}) };
      return { state: { ...s, code, phase: failed }, effects: [{ type: 'disconnect' }] };
    }
    case 'rotated': {
      const next: PairState = { ...s, tokens: { ...s.tokens, [ev.role]: ev.deviceToken } };
      return { state: next, effects: [save(next)] };
    }
    case 'retry': {
      if (s.gatewayId && mayRetry(s.phase)) {
        if (s.code) return { state: { ...s, phase: { phase: 'connecting', via: 'code' } }, effects: [{ type: 'connect-pair', setupCode: s.code }] };
        return { state: { ...s, phase: { phase: 'connecting', via: 'repair' } }, effects: [{ type: 'connect-pair', setupCode: null }] };
      }
      return { state: s, effects: [] };
    }
  }
}

/**
 * Whether the page offers "Ask again" in phase p: after a rejection, an expiry or a refusal, but not
 * for a locked code. A locked code is dead for good (the person makes a new one and scans it); asking
 * again would only present it once more.
 */
export function mayRetry(p: PairPhase): boolean {
  if (p.phase === 'failed') return p.reason !== 'code_locked';
  return p.phase === 'rejected' || p.phase === 'expired';
}
