// The device identity of the phone page: the v2 signed string (byte for byte what backend/device
// builds) and WebCrypto keys and signatures in the wire forms the gateway reads.
import { describe, expect, it } from 'vitest';
import { PayloadFieldError, generateDeviceKey, signConnect, signedPayloadV2, toHex, type PayloadFields } from './device';

const gw = 'a'.repeat(64);
const base: PayloadFields = {
  gatewayId: gw,
  deviceId: 'b'.repeat(64),
  clientId: 'atrium-phone',
  mode: 'node',
  role: 'node',
  scopes: [],
  signedAtMs: 1767225600123,
  token: 'ABCD2345',
  nonce: 'n-42',
};

function fromB64(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

describe('signedPayloadV2', () => {
  it('joins the fields as docs/PROTOCOL.md says', () => {
    expect(signedPayloadV2(base)).toBe(`v2|${gw}|${'b'.repeat(64)}|atrium-phone|node|node||1767225600123|ABCD2345|n-42`);
    expect(signedPayloadV2({ ...base, scopes: ['a', 'b'], token: '', mode: '' })).toBe(`v2|${gw}|${'b'.repeat(64)}|atrium-phone||node|a,b|1767225600123||n-42`);
  });

  it('refuses fields that would make the string ambiguous, and empty required fields', () => {
    const bad: Partial<PayloadFields>[] = [
      { token: 'a|b' },
      { clientId: 'x|y' },
      { mode: '|' },
      { scopes: ['a,b'] },
      { scopes: [''] },
      { gatewayId: '' },
      { deviceId: '' },
      { role: '' },
      { nonce: '' },
      { clientId: '' },
      { signedAtMs: 1.5 },
      { signedAtMs: -1 },
    ];
    for (const b of bad) expect(() => signedPayloadV2({ ...base, ...b }), JSON.stringify(b)).toThrow(PayloadFieldError);
  });
});

describe('device keys (WebCrypto)', () => {
  const subtle = globalThis.crypto.subtle;
  for (const alg of ['ed25519', 'ecdsa-p256'] as const) {
    it(`${alg}: raw public key, deviceId = hex SHA-256 of it, a signature that verifies over the v2 string`, async () => {
      const key = await generateDeviceKey(subtle, [alg]);
      expect(key.algorithm).toBe(alg);
      expect(key.privateKey.extractable).toBe(false);
      const raw = fromB64(key.publicKey);
      expect(raw.length).toBe(alg === 'ed25519' ? 32 : 65);
      if (alg === 'ecdsa-p256') expect(raw[0]).toBe(4);
      expect(key.deviceId).toBe(toHex(await subtle.digest('SHA-256', raw)));
      expect(key.deviceId).toMatch(/^[0-9a-f]{64}$/);

      const proof = await signConnect(key, { gatewayId: gw, clientId: 'atrium-phone', mode: 'node', role: 'node', scopes: [], token: 'ABCD2345', nonce: 'n-42' }, 1767225600123.7, subtle);
      expect(proof).toMatchObject({ id: key.deviceId, algorithm: alg, publicKey: key.publicKey, signedAt: 1767225600123, nonce: 'n-42' });
      const sig = fromB64(proof.signature);
      expect(sig.length).toBe(64); // Ed25519, or P-256 in P1363 r‖s form
      const imp = alg === 'ed25519' ? { name: 'Ed25519' } : { name: 'ECDSA', namedCurve: 'P-256' };
      const pub = await subtle.importKey('raw', raw, imp, true, ['verify']);
      const ver = alg === 'ed25519' ? { name: 'Ed25519' } : { name: 'ECDSA', hash: 'SHA-256' };
      const msg = signedPayloadV2({ ...base, deviceId: key.deviceId });
      expect(await subtle.verify(ver, pub, sig, new TextEncoder().encode(msg))).toBe(true);
      // Another nonce, another gateway: the same signature does not verify.
      expect(await subtle.verify(ver, pub, sig, new TextEncoder().encode(msg.replace('n-42', 'n-43')))).toBe(false);
      expect(await subtle.verify(ver, pub, sig, new TextEncoder().encode(msg.replace(gw, 'c'.repeat(64))))).toBe(false);
    });
  }

  it('falls back to P-256 when the browser lacks Ed25519', async () => {
    const noEd: SubtleCrypto = new Proxy(subtle, {
      get(target, prop) {
        if (prop === 'generateKey')
          return (alg: Algorithm, ex: boolean, use: KeyUsage[]) =>
            alg.name === 'Ed25519' ? Promise.reject(new DOMException('Unrecognized name', 'NotSupportedError')) : target.generateKey(alg as EcKeyGenParams, ex, use);
        const v = Reflect.get(target, prop);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const key = await generateDeviceKey(noEd);
    expect(key.algorithm).toBe('ecdsa-p256');
  });
});
