// Pairing on the phone page: the QR URL's fragment, the setup code's normal form, the fingerprint
// words (the desktop's, backend/gwid), and the pairing state machine.
import { describe, expect, it } from 'vitest';
import {
  connectToken,
  displayCode,
  fingerprintWords,
  initialPairState,
  mayRetry,
  normalizeCode,
  pairStep,
  parsePairFragment,
  type PairEvent,
  type PairPhase,
  type PairState,
  type Step,
} from './pairing';

const G = '1'.repeat(64);
const F = '7f0000013f54dcc1' + '0'.repeat(48);

describe('setup codes', () => {
  it('normalizes like backend/pairing NormalizeCode', () => {
    expect(normalizeCode('abcd-2345')).toBe('ABCD2345');
    expect(normalizeCode(' ab cd 23 45 ')).toBe('ABCD2345');
    expect(normalizeCode('OIL0-1234')).toBe('01101234');
    expect(normalizeCode('ABCD-234')).toBeNull(); // 7 characters
    expect(normalizeCode('ABCD-23456')).toBeNull();
    expect(normalizeCode('ABCU-2345')).toBeNull(); // U is not in Crockford's alphabet
    expect(normalizeCode('ÄBCD-2345')).toBeNull();
    expect(displayCode('ABCD2345')).toBe('ABCD-2345');
  });

  it('the v2 token: deviceToken, else the normalized code, else the operator token', () => {
    expect(connectToken({ deviceToken: 'dt', setupCode: 'abcd-2345', token: 't' })).toBe('dt');
    expect(connectToken({ setupCode: 'abcd-2345', token: 't' })).toBe('ABCD2345');
    expect(connectToken({ token: 't' })).toBe('t');
    expect(connectToken({})).toBe('');
  });
});

describe('parsePairFragment', () => {
  it('reads c, g and f', () => {
    expect(parsePairFragment(`#c=abcd-2345&g=${G}&f=${F.toUpperCase()}`)).toEqual({ ok: true, value: { code: 'ABCD2345', gatewayId: G, fingerprint: F } });
    // A fingerprint written with colons, parameters in another order.
    const colons = F.match(/../g)!.join(':');
    expect(parsePairFragment(`f=${colons}&g=${G}&c=ABCD2345`)).toMatchObject({ ok: true, value: { fingerprint: F } });
  });

  it('says what is wrong', () => {
    expect(parsePairFragment('')).toEqual({ ok: false, error: 'none' });
    expect(parsePairFragment('#')).toEqual({ ok: false, error: 'none' });
    expect(parsePairFragment('#token=abc')).toEqual({ ok: false, error: 'none' });
    expect(parsePairFragment(`#c=abc&g=${G}&f=${F}`)).toEqual({ ok: false, error: 'code' });
    expect(parsePairFragment(`#c=ABCD2345&g=xyz&f=${F}`)).toEqual({ ok: false, error: 'gateway' });
    expect(parsePairFragment(`#c=ABCD2345&g=${G}`)).toEqual({ ok: false, error: 'fingerprint' });
    expect(parsePairFragment(`#c=ABCD2345&g=${G}&f=${F.slice(2)}`)).toEqual({ ok: false, error: 'fingerprint' });
    // Plain loopback HTTP (no certificate): the fingerprint may be absent, never malformed.
    expect(parsePairFragment(`#c=ABCD2345&g=${G}`, false)).toEqual({ ok: true, value: { code: 'ABCD2345', gatewayId: G, fingerprint: '' } });
    expect(parsePairFragment(`#c=ABCD2345&g=${G}&f=`, false)).toMatchObject({ ok: true });
    expect(parsePairFragment(`#c=ABCD2345&g=${G}&f=12`, false)).toEqual({ ok: false, error: 'fingerprint' });
  });
});

describe('fingerprintWords', () => {
  it('is the desktop’s proquint rendering of the first 64 bits (backend/gwid test vector)', () => {
    expect(fingerprintWords(F)).toBe('lusab babad gutih tugad');
    expect(fingerprintWords(F.slice(0, 15) + '0' + F.slice(16))).not.toBe('lusab babad gutih tugad');
    expect(fingerprintWords(F.slice(0, 16) + 'f'.repeat(48))).toBe('lusab babad gutih tugad');
    expect(fingerprintWords('nothex')).toBe('');
  });
});

// Runs events from the initial state, returning every step.
function run(...events: PairEvent[]): Step[] {
  let s: PairState = initialPairState;
  const steps: Step[] = [];
  for (const ev of events) {
    const step = pairStep(s, ev);
    steps.push(step);
    s = step.state;
  }
  return steps;
}
const frag = parsePairFragment(`#c=ABCD-2345&g=${G}&f=${F}`);
const loadedWithCode: PairEvent = { type: 'loaded', stored: null, fragment: frag };

describe('pairStep', () => {
  it('code → pending → approved: tokens saved, one connection per role', () => {
    const [a, b, c] = run(
      loadedWithCode,
      { type: 'hello', auth: { status: 'pending', requestId: 'r1', gatewayId: G }, gatewayId: G },
      { type: 'resolved', decision: 'approved', deviceTokens: { operator: 'op-tok', node: 'node-tok' } },
    );
    expect(a.state.phase).toEqual({ phase: 'connecting', via: 'code' });
    expect(a.effects).toEqual([{ type: 'connect-pair', setupCode: 'ABCD2345' }]);
    expect(b.state.phase).toEqual({ phase: 'pending', requestId: 'r1', repair: false });
    expect(b.effects).toEqual([{ type: 'save', stored: { gatewayId: G, fingerprint: F, tokens: {} } }]);
    expect(c.state.phase).toEqual({ phase: 'paired', roles: ['operator', 'node'] });
    expect(c.state.code).toBeNull();
    expect(c.effects).toEqual([
      { type: 'save', stored: { gatewayId: G, fingerprint: F, tokens: { operator: 'op-tok', node: 'node-tok' } } },
      { type: 'connect-paired', tokens: { operator: 'op-tok', node: 'node-tok' } },
    ]);
  });

  it('tokens delivered in hello-ok (reconnect after approval) admit at once', () => {
    const [, b] = run(loadedWithCode, { type: 'hello', auth: { status: 'pending', deviceTokens: { node: 'n' } } });
    expect(b.state.phase).toEqual({ phase: 'paired', roles: ['node'] });
    expect(b.effects[1]).toEqual({ type: 'connect-paired', tokens: { node: 'n' } });
  });

  it('stored tokens: connects with them; a stored gateway without tokens asks to repair', () => {
    const [a, b] = run({ type: 'loaded', stored: { gatewayId: G, fingerprint: F, tokens: { operator: 'o' } }, fragment: { ok: false, error: 'none' } }, { type: 'hello', auth: { status: 'paired' } });
    expect(a.effects).toEqual([{ type: 'connect-paired', tokens: { operator: 'o' } }]);
    expect(b.state.phase).toEqual({ phase: 'paired', roles: ['operator'] });
    const [c] = run({ type: 'loaded', stored: { gatewayId: G, fingerprint: F, tokens: {} }, fragment: { ok: false, error: 'none' } });
    expect(c.effects).toEqual([{ type: 'connect-pair', setupCode: null }]);
    expect(c.state.phase).toEqual({ phase: 'connecting', via: 'repair' });
  });

  it('a code for this gateway while paired keeps the tokens; a code for another gateway starts over', () => {
    const [a] = run({ type: 'loaded', stored: { gatewayId: G, fingerprint: F, tokens: { node: 'n' } }, fragment: frag });
    expect(a.effects).toEqual([{ type: 'connect-paired', tokens: { node: 'n' } }]);
    const other = '2'.repeat(64);
    const [b] = run({ type: 'loaded', stored: { gatewayId: other, fingerprint: F, tokens: { node: 'n' } }, fragment: frag });
    expect(b.effects).toEqual([{ type: 'connect-pair', setupCode: 'ABCD2345' }]);
    expect(b.state.tokens).toEqual({});
  });

  it('nothing to go on: asks for a code, saying what was wrong with the link', () => {
    expect(run({ type: 'loaded', stored: null, fragment: { ok: false, error: 'none' } })[0].state.phase).toEqual({ phase: 'need-code', error: undefined });
    expect(run({ type: 'loaded', stored: null, fragment: { ok: false, error: 'code' } })[0].state.phase).toEqual({ phase: 'need-code', error: 'code' });
  });

  it('a token mismatch drops that token only, never the key, and asks to repair with the proof alone', () => {
    const steps = run(
      { type: 'loaded', stored: { gatewayId: G, fingerprint: F, tokens: { operator: 'o', node: 'n' } }, fragment: { ok: false, error: 'none' } },
      { type: 'refused', role: 'node', code: 'UNAUTHORIZED', message: 'device token mismatch', reason: 'device_token_mismatch' },
      { type: 'hello', auth: { status: 'pending', requestId: 'r2' } },
      { type: 'resolved', decision: 'approved', deviceTokens: { node: 'n2' } },
    );
    const refused = steps[1];
    expect(refused.state.tokens).toEqual({ operator: 'o' });
    expect(refused.effects).toEqual([
      { type: 'save', stored: { gatewayId: G, fingerprint: F, tokens: { operator: 'o' } } },
      { type: 'connect-pair', setupCode: null },
    ]);
    expect(steps[2].state.phase).toEqual({ phase: 'pending', requestId: 'r2', repair: true });
    expect(steps[3].state.tokens).toEqual({ operator: 'o', node: 'n2' });
    expect(steps[3].effects[1]).toEqual({ type: 'connect-paired', tokens: { operator: 'o', node: 'n2' } });
  });

  it('rejected, expired, a spent code: stops; retry asks again (with the proof alone once the code is spent)', () => {
    const r = run(loadedWithCode, { type: 'hello', auth: { status: 'pending' } }, { type: 'resolved', decision: 'rejected' }, { type: 'retry' });
    expect(r[2].state.phase).toEqual({ phase: 'rejected' });
    expect(r[2].effects).toEqual([{ type: 'disconnect' }]);
    expect(r[3].effects).toEqual([{ type: 'connect-pair', setupCode: null }]);
    expect(run(loadedWithCode, { type: 'resolved', decision: 'expired' })[1].state.phase).toEqual({ phase: 'expired' });
    const spent = run(loadedWithCode, { type: 'refused', code: 'NOT_PAIRED', message: 'setup code already used' }, { type: 'retry' });
    expect(spent[1].state.phase).toEqual({ phase: 'failed', code: 'NOT_PAIRED', message: 'setup code already used' });
    expect(spent[2].effects).toEqual([{ type: 'connect-pair', setupCode: null }]);
    const used = run(loadedWithCode, { type: 'refused', code: 'UNAUTHORIZED', message: 'setup code already used', reason: 'code_used' }, { type: 'retry' });
    expect(used[2].effects).toEqual([{ type: 'connect-pair', setupCode: null }]);
    // A code locked after wrong tries on the network is dead: the reason stays for the page to explain.
    const locked = run(loadedWithCode, { type: 'refused', code: 'UNAUTHORIZED', message: 'locked after 10 wrong tries', reason: 'code_locked' }, { type: 'retry' });
    expect(locked[1].state.phase).toEqual({ phase: 'failed', code: 'UNAUTHORIZED', message: 'locked after 10 wrong tries', reason: 'code_locked' });
    // Nothing to ask again with: the page offers no "Ask again", and a retry does nothing.
    expect(locked[2].effects).toEqual([]);
    expect(locked[2].state.phase).toEqual(locked[1].state.phase);
    expect(mayRetry(locked[1].state.phase)).toBe(false);
    expect(mayRetry(used[1].state.phase)).toBe(true);
    expect(mayRetry({ phase: 'rejected' })).toBe(true);
    expect(mayRetry({ phase: 'paired', roles: ['operator'] } as PairPhase)).toBe(false);
    // A refusal that is not about the code itself (the guessing limit) keeps it for a retry.
    const limited = run(loadedWithCode, { type: 'refused', code: 'UNAUTHORIZED', message: 'too many attempts', reason: 'rate_limited' }, { type: 'retry' });
    expect(limited[2].effects).toEqual([{ type: 'connect-pair', setupCode: 'ABCD2345' }]);
  });

  it('another gateway than the code names: refuses and disconnects', () => {
    const [, b] = run(loadedWithCode, { type: 'hello', auth: { status: 'pending' }, gatewayId: '9'.repeat(64) });
    expect(b.state.phase).toMatchObject({ phase: 'failed', code: 'GATEWAY_MISMATCH' });
    expect(b.effects).toEqual([{ type: 'disconnect' }]);
  });

  it('a rotated token is saved', () => {
    const [, b] = run({ type: 'loaded', stored: { gatewayId: G, fingerprint: F, tokens: { node: 'n' } }, fragment: { ok: false, error: 'none' } }, { type: 'rotated', role: 'node', deviceToken: 'n3' });
    expect(b.effects).toEqual([{ type: 'save', stored: { gatewayId: G, fingerprint: F, tokens: { node: 'n3' } } }]);
  });
});
