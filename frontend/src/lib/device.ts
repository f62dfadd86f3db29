// The identity of this browser as a device (the phone page, issue 16): a WebCrypto key pair that
// never leaves the browser (non-extractable private key, kept in IndexedDB), its deviceId, and the
// proof that `connect` carries. The wire forms are docs/PROTOCOL.md "Device identity" (reference:
// backend/device):
//   publicKey  base64 of the raw key (Ed25519: 32 bytes; P-256: the 65-byte point 0x04‖X‖Y)
//   deviceId   lowercase hex SHA-256 of those raw bytes
//   signature  base64 of 64 bytes (Ed25519, or ECDSA P-256/SHA-256 in P1363 form r‖s: what WebCrypto returns)
//   signed     v2|gatewayId|deviceId|clientId|mode|role|scopes|signedAtMs|token|nonce

export type DeviceAlgorithm = 'ed25519' | 'ecdsa-p256';

/** A device key as kept in IndexedDB: the private key stays a non-extractable CryptoKey. */
export interface DeviceKey {
  algorithm: DeviceAlgorithm;
  privateKey: CryptoKey;
  /** base64 (standard alphabet, padded) of the raw public key. */
  publicKey: string;
  deviceId: string;
}

/** What `connect.device` carries. */
export interface DeviceProof {
  id: string;
  algorithm: DeviceAlgorithm;
  publicKey: string;
  signature: string;
  signedAt: number;
  nonce: string;
}

export interface PayloadFields {
  gatewayId: string;
  deviceId: string;
  clientId: string;
  mode: string;
  role: string;
  scopes: readonly string[];
  signedAtMs: number;
  token: string;
  nonce: string;
}

/** A field that would make the signed string ambiguous (or is empty where it must not be). */
export class PayloadFieldError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PayloadFieldError';
  }
}

/**
 * The v2 signed string (docs/PROTOCOL.md): fields joined by "|", scopes by ",". Refuses (throws
 * PayloadFieldError) a field holding "|", a scope holding "," or empty, an empty gatewayId, deviceId,
 * clientId, role or nonce, and a signedAtMs that is not a non-negative integer — the same rules as
 * backend/device Payload.Bytes, so that the gateway rebuilds exactly these bytes.
 */
export function signedPayloadV2(f: PayloadFields): string {
  const required: [string, string][] = [
    ['gatewayId', f.gatewayId],
    ['deviceId', f.deviceId],
    ['clientId', f.clientId],
    ['role', f.role],
    ['nonce', f.nonce],
  ];
  for (const [name, v] of required) if (!v) throw new PayloadFieldError(`${name} is empty`);
  const fields: [string, string][] = [...required, ['mode', f.mode], ['token', f.token]];
  for (const [name, v] of fields) if (v.includes('|')) throw new PayloadFieldError(`${name} contains "|"`);
  for (const s of f.scopes) {
    if (!s || s.includes(',') || s.includes('|')) throw new PayloadFieldError(`bad scope ${JSON.stringify(s)}`);
  }
  if (!Number.isSafeInteger(f.signedAtMs) || f.signedAtMs < 0) throw new PayloadFieldError('signedAtMs is not a whole number of ms');
  return ['v2', f.gatewayId, f.deviceId, f.clientId, f.mode, f.role, f.scopes.join(','), String(f.signedAtMs), f.token, f.nonce].join('|');
}

export function toBase64(buf: ArrayBuffer | Uint8Array): string {
  const b = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s);
}

export function toHex(buf: ArrayBuffer | Uint8Array): string {
  const b = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** The WebCrypto parameters of each algorithm. */
const ALGS: Record<DeviceAlgorithm, { gen: EcKeyGenParams | Algorithm; sign: EcdsaParams | Algorithm }> = {
  ed25519: { gen: { name: 'Ed25519' }, sign: { name: 'Ed25519' } },
  'ecdsa-p256': { gen: { name: 'ECDSA', namedCurve: 'P-256' } as EcKeyGenParams, sign: { name: 'ECDSA', hash: 'SHA-256' } as EcdsaParams },
};

/**
 * Makes a new device key: Ed25519 where the browser has it, else ECDSA P-256 (the algorithm is
 * recorded and travels with the key). The private key is non-extractable.
 */
export async function generateDeviceKey(subtle: SubtleCrypto = globalThis.crypto.subtle, prefer: DeviceAlgorithm[] = ['ed25519', 'ecdsa-p256']): Promise<DeviceKey> {
  let lastErr: unknown = null;
  for (const algorithm of prefer) {
    try {
      const kp = (await subtle.generateKey(ALGS[algorithm].gen, false, ['sign', 'verify'])) as CryptoKeyPair;
      const raw = await subtle.exportKey('raw', kp.publicKey);
      const deviceId = toHex(await subtle.digest('SHA-256', raw));
      return { algorithm, privateKey: kp.privateKey, publicKey: toBase64(raw), deviceId };
    } catch (e) {
      lastErr = e; // this browser lacks the algorithm: try the next
    }
  }
  throw new Error(`this browser can make no device key (WebCrypto Ed25519 or P-256): ${lastErr instanceof Error ? lastErr.message : String(lastErr)}`);
}

/** Signs the v2 payload for this connection and returns `connect.device`. */
export async function signConnect(
  key: DeviceKey,
  f: Omit<PayloadFields, 'deviceId' | 'signedAtMs'>,
  now: number = Date.now(),
  subtle: SubtleCrypto = globalThis.crypto.subtle,
): Promise<DeviceProof> {
  const signedAt = Math.floor(now);
  const msg = signedPayloadV2({ ...f, deviceId: key.deviceId, signedAtMs: signedAt });
  const sig = await subtle.sign(ALGS[key.algorithm].sign, key.privateKey, new TextEncoder().encode(msg));
  return { id: key.deviceId, algorithm: key.algorithm, publicKey: key.publicKey, signature: toBase64(sig), signedAt, nonce: f.nonce };
}
