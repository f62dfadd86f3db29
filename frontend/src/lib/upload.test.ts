import { describe, expect, it } from 'vitest';
import type { GatewayClient } from './gateway';
import { sendOver } from './camera';
import { hex, TransferError, type MediaFile } from './mediasend';
import { uploadBlockSize, uploadMedia } from './upload';

const ID = '0123456789abcdef0123456789abcdef';
const CRED = { deviceId: 'dev-1', token: 'tok-secret' };

async function sha(b: Uint8Array): Promise<string> {
  return hex(await crypto.subtle.digest('SHA-256', b as Uint8Array<ArrayBuffer>));
}

function fileOf(n: number): MediaFile {
  const data = new Uint8Array(n);
  for (let i = 0; i < n; i++) data[i] = (i * 31 + 7) & 0xff;
  return { id: ID, name: 'photo.jpg', data, mime: 'image/jpeg', width: 4, height: 3 };
}

interface Plan {
  size: number;
  sha256: string;
  blockSize: number;
  blocks: string[];
}

/** The gateway's upload route in memory (backend/upload's rules that the page relies on). */
class FakeGateway {
  plan: Plan | null = null;
  have = new Map<number, Uint8Array>();
  puts: number[] = [];
  deletes = 0;
  /** Throw a network error on the PUT of these blocks, once each. */
  cutAt = new Set<number>();
  /** Answer every POST with this refusal. */
  refuse: { status: number; code: string } | null = null;
  headers: Record<string, string>[] = [];

  fetch = async (url: RequestInfo | URL, init: RequestInit = {}): Promise<Response> => {
    const u = new URL(String(url));
    const h = init.headers as Record<string, string>;
    this.headers.push(h);
    if (h.Authorization !== `Bearer ${CRED.token}` || h['X-Atrium-Device'] !== CRED.deviceId) return json(401, { message: 'device token refused' });
    const [, , , id, block] = u.pathname.split('/');
    if (id !== ID) return json(403, { message: 'not requested' });
    const method = init.method ?? 'GET';
    if (method === 'DELETE') {
      this.deletes++;
      this.plan = null;
      return new Response(null, { status: 204 });
    }
    if (method === 'POST') {
      if (this.refuse) return json(this.refuse.status, { code: this.refuse.code, message: 'refused' });
      const p = JSON.parse(String(init.body)) as Plan;
      if (this.plan && this.plan.sha256 !== p.sha256) this.have.clear();
      this.plan = p;
      return json(200, this.status());
    }
    if (method === 'GET') return json(200, this.status());
    const i = Number(block);
    const body = init.body as Uint8Array;
    if (this.cutAt.delete(i)) throw new TypeError('Failed to fetch');
    if (!this.plan || i >= this.plan.blocks.length) return json(400, { code: 'UNREQUESTED_BLOCK', message: 'endless' });
    if (h['X-Atrium-Block-SHA256'] !== this.plan.blocks[i] || (await sha(body)) !== this.plan.blocks[i]) return json(422, { code: 'CHECKSUM', message: 'bad block' });
    this.puts.push(i);
    this.have.set(i, body.slice());
    const st = this.status();
    if (st.missing.length === 0) {
      const all = new Uint8Array(this.plan.size);
      for (const [k, b] of this.have) all.set(b, k * this.plan.blockSize);
      return json(200, { ...st, stored: true, media: { id: ID, size: all.length, sha256: await sha(all), transport: 'https' } });
    }
    return json(200, st);
  };

  status() {
    const n = this.plan?.blocks.length ?? 0;
    const missing: [number, number][] = [];
    for (let i = 0; i < n; i++) {
      if (this.have.has(i)) continue;
      const last = missing[missing.length - 1];
      if (last && last[1] === i) last[1]++;
      else missing.push([i, i + 1]);
    }
    return { id: ID, blocks: n, blockSize: this.plan?.blockSize ?? 0, missing, stored: false };
  }
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

/** An RTCPeerConnection whose data channel never comes: no candidate to offer, or ICE fails after the answer. */
function failingPC(mode: 'nocandidates' | 'icefails'): typeof RTCPeerConnection {
  return class {
    iceGatheringState = 'complete';
    connectionState = 'new';
    localDescription: { type: string; sdp: string } | null = null;
    private listeners: Record<string, (() => void)[]> = {};
    sctp = null;
    createDataChannel() {
      return { addEventListener() {}, readyState: 'connecting', close() {} };
    }
    addEventListener(ev: string, f: () => void) {
      (this.listeners[ev] ??= []).push(f);
    }
    async createOffer() {
      return { type: 'offer', sdp: mode === 'nocandidates' ? 'v=0\r\n' : 'v=0\r\na=candidate:1 1 udp 1 192.0.2.1 9 typ host\r\n' };
    }
    async setLocalDescription(d: { type: string; sdp: string }) {
      this.localDescription = d;
    }
    async setRemoteDescription() {
      setTimeout(() => {
        this.connectionState = 'failed';
        for (const f of this.listeners.connectionstatechange ?? []) f();
      }, 0);
    }
    close() {}
  } as unknown as typeof RTCPeerConnection;
}

function fakeGw(offers: string[], refuse = false): GatewayClient {
  return {
    request: async (method: string, params: { transferId: string }) => {
      offers.push(`${method} ${params.transferId}`);
      if (refuse) throw Object.assign(new Error('node.media.offer: no transfer'), { code: 'FORBIDDEN' });
      return { sdp: 'v=0\r\n' };
    },
  } as unknown as GatewayClient;
}

describe('the HTTPS upload fallback (upload.ts)', () => {
  it('uploads a file in blocks with its plan and the device token, and the result says https', async () => {
    const gw = new FakeGateway();
    const f = fileOf(5000);
    const sent = await uploadMedia(f, CRED, { fetch: gw.fetch, base: 'https://gw.test', blockSize: 1024 });
    expect(sent.transport).toBe('https');
    expect(sent.sha256).toBe(await sha(f.data));
    expect(sent.blocks).toBe(5);
    expect(gw.puts).toEqual([0, 1, 2, 3, 4]);
    expect(gw.plan?.size).toBe(5000);
    expect(gw.headers.every((h) => h.Authorization === 'Bearer tok-secret')).toBe(true);
  });

  it('resumes a cut upload with the missing blocks only', async () => {
    const gw = new FakeGateway();
    gw.cutAt.add(2);
    const sent = await uploadMedia(fileOf(5000), CRED, { fetch: gw.fetch, base: 'https://gw.test', blockSize: 1024 });
    expect(gw.puts).toEqual([0, 1, 2, 3, 4]); // 2 cut once, then sent with 3 and 4; 0 and 1 not again
    expect(sent.blocksSent).toBe(5);
    expect(sent.rounds).toBe(2);
  });

  it('passes a refusal on with its code and does not retry it', async () => {
    const gw = new FakeGateway();
    gw.refuse = { status: 413, code: 'TOO_LARGE' };
    const err = await uploadMedia(fileOf(3000), CRED, { fetch: gw.fetch, base: 'https://gw.test' }).catch((e) => e);
    expect(err).toBeInstanceOf(TransferError);
    expect(err.code).toBe('TOO_LARGE');
    expect(err.remote).toBe(true);
    expect(gw.puts).toEqual([]);
  });

  it('a wrong token is UNAUTHORIZED', async () => {
    const gw = new FakeGateway();
    const err = await uploadMedia(fileOf(3000), { ...CRED, token: 'other' }, { fetch: gw.fetch, base: 'https://gw.test' }).catch((e) => e);
    expect(err.code).toBe('UNAUTHORIZED');
  });

  it('a cancel tells the gateway (DELETE) and ends CANCELLED', async () => {
    const gw = new FakeGateway();
    const ac = new AbortController();
    const slow: typeof fetch = async (url, init) => {
      if (init?.method === 'PUT') ac.abort();
      return gw.fetch(url, init);
    };
    const err = await uploadMedia(fileOf(5000), CRED, { fetch: slow, base: 'https://gw.test', blockSize: 1024, signal: ac.signal }).catch((e) => e);
    expect(err.code).toBe('CANCELLED');
    expect(gw.deletes).toBe(1);
  });

  it('takes bigger blocks for big files (at most 4096 blocks, 4 MiB each)', () => {
    expect(uploadBlockSize(5000)).toBe(1 << 20);
    expect(uploadBlockSize(32 * 2 ** 30)).toBe(4 << 20);
    expect(uploadBlockSize(6 * 2 ** 30)).toBe(1.5 * 2 ** 20);
  });
});

describe('sendOver falls back to HTTPS when no data channel can be set up', () => {
  for (const [what, PC] of [
    ['no RTCPeerConnection', undefined],
    ['no candidate to offer', failingPC('nocandidates')],
    ['ICE fails', failingPC('icefails')],
  ] as const) {
    it(what, async () => {
      const gw = new FakeGateway();
      const offers: string[] = [];
      const send = sendOver(fakeGw(offers), {
        credential: () => CRED,
        rtc: { RTCPeerConnection: PC ?? (null as unknown as typeof RTCPeerConnection), connectTimeoutMs: 5000 },
        upload: { fetch: gw.fetch, base: 'https://gw.test', blockSize: 1024 },
      });
      const f = fileOf(3000);
      const sent = await send(f);
      expect(sent.transport).toBe('https');
      expect(sent.sha256).toBe(await sha(f.data));
      expect(gw.puts).toEqual([0, 1, 2]);
      if (what === 'ICE fails') expect(offers).toEqual([`node.media.offer ${ID}`]);
    });
  }

  it('without the node credential there is no fallback', async () => {
    const send = sendOver(fakeGw([]), { credential: () => null, rtc: { RTCPeerConnection: failingPC('nocandidates') } });
    const err = await send(fileOf(3000)).catch((e) => e);
    expect(err).toBeInstanceOf(TransferError);
    expect(err.setup).toBe(true);
  });

  it("the gateway's refusal of the offer is no setup failure: no upload", async () => {
    const gw = new FakeGateway();
    const send = sendOver(fakeGw([], true), {
      credential: () => CRED,
      rtc: { RTCPeerConnection: failingPC('icefails') },
      upload: { fetch: gw.fetch, base: 'https://gw.test' },
    });
    const err = await send(fileOf(3000)).catch((e) => e);
    expect(err).not.toBeInstanceOf(TransferError);
    expect(gw.plan).toBeNull();
  });
});
