// The phone page's outbox: a file is kept (IndexedDB in the page, a MemoryKV here) while it is sent, and a page
// opened again after being killed mid-send finishes it (backend/e2e kills a real Chromium page in the middle).
import { describe, expect, it, vi } from 'vitest';
import { GatewayError } from './gateway';
import { TransferError, type MediaFile, type Sent } from './mediasend';
import { Outbox, OUTBOX_MAX, OUTBOX_TTL_MS, resumeKept, resumable, sendKept } from './outbox';
import { MemoryKV } from './phone';

const file = (id: string): MediaFile => ({ id, name: 'clip.webm', data: new Uint8Array([1, 2, 3]), mime: 'video/webm', durationMs: 1000 });
const sent = (blocksSent = 1): Sent => ({ sha256: 'ab', blockSize: 65536, blocks: 4, blocksSent, rounds: 1 });
const noSignal = () => async () => 'sdp';

describe('Outbox', () => {
  it('keeps, lists oldest first, drops, and bounds what it keeps', async () => {
    const kv = new MemoryKV();
    const o = new Outbox(kv);
    for (let i = 0; i < OUTBOX_MAX + 2; i++) await o.keep(file(`t${i}`));
    const ids = (await o.list()).map((k) => k.file.id);
    expect(ids).toEqual(Array.from({ length: OUTBOX_MAX }, (_, i) => `t${i + 2}`));
    expect(kv.data.has('send:t0')).toBe(false);
    await o.drop('t3');
    expect((await o.list()).map((k) => k.file.id)).not.toContain('t3');
    expect(kv.data.has('send:t3')).toBe(false);
    await o.keep(file('t4')); // again: replaced, moved last
    expect((await o.list()).map((k) => k.file.id).at(-1)).toBe('t4');
  });

  it('drops what expired', async () => {
    let now = 1000;
    const kv = new MemoryKV();
    const o = new Outbox(kv, () => now);
    await o.keep(file('old'));
    now += OUTBOX_TTL_MS;
    expect(await o.list()).toEqual([]);
    expect(kv.data.has('send:old')).toBe(false);
  });
});

describe('sendKept', () => {
  it('keeps the file while it is sent, retries a cut, and forgets it at the end', async () => {
    const o = new Outbox(new MemoryKV());
    let calls = 0;
    const send = vi.fn(async (f: MediaFile) => {
      expect((await o.list()).map((k) => k.file.id)).toEqual([f.id]);
      expect(o.active.has(f.id)).toBe(true);
      if (calls++ === 0) throw new TransferError('CLOSED', 'the data channel closed');
      return sent(2);
    });
    const r = await sendKept(file('a'), noSignal(), { outbox: o, retries: 2, send });
    expect(r).toMatchObject({ attempts: 2, blocksSent: 2 });
    expect(await o.list()).toEqual([]);
    expect(o.active.size).toBe(0);
  });

  it('forgets the file after a refusal too, and sends without an outbox', async () => {
    const o = new Outbox(new MemoryKV());
    const refuse = async () => {
      throw new TransferError('TOO_LARGE', 'no', true);
    };
    await expect(sendKept(file('a'), noSignal(), { outbox: o, retries: 2, send: refuse })).rejects.toMatchObject({ code: 'TOO_LARGE' });
    expect(await o.list()).toEqual([]);
    await expect(sendKept(file('b'), noSignal(), { retries: 0, send: async () => sent() })).resolves.toMatchObject({ attempts: 1 });
  });

  it('stops retrying after retries cuts', async () => {
    const send = vi.fn(async () => {
      throw new TransferError('CLOSED', 'cut');
    });
    await expect(sendKept(file('a'), noSignal(), { retries: 2, send })).rejects.toMatchObject({ code: 'CLOSED' });
    expect(send).toHaveBeenCalledTimes(3);
  });
});

describe('resumeKept', () => {
  it('finishes what a killed page left, drops what the gateway refuses, keeps a cut one, leaves a running one', async () => {
    const o = new Outbox(new MemoryKV());
    expect(OUTBOX_MAX).toBeGreaterThanOrEqual(4);
    for (const id of ['done', 'refused', 'cut', 'running']) await o.keep(file(id));
    o.active.add('running');
    const signalled: string[] = [];
    const send = vi.fn(async (f: MediaFile) => {
      if (f.id === 'refused') throw new GatewayError('FORBIDDEN', 'node.media.offer: no transfer was asked for');
      if (f.id === 'cut') throw new TransferError('CLOSED', 'cut again');
      if (f.id === 'broken') throw new TransferError('CHECKSUM', 'stored something else');
      return sent(1);
    });
    const resumed: string[] = [];
    await resumeKept(
      o,
      (id) => {
        signalled.push(id);
        return async () => 'sdp';
      },
      (r) => resumed.push(`${r.id}:${r.sent.blocksSent}`),
      send,
    );
    expect(resumed).toEqual(['done:1']);
    expect(send.mock.calls.map(([f]) => f.id)).toEqual(['done', 'refused', 'cut']);
    expect(signalled).toEqual(['done', 'refused', 'cut']);
    expect((await o.list()).map((k) => k.file.id).sort()).toEqual(['cut', 'running']);
    expect(o.active).toEqual(new Set(['running']));
    // A send that fails for good (not a cut) is dropped too.
    await o.keep(file('broken'));
    o.active.add('cut');
    await resumeKept(o, () => async () => 'sdp', () => undefined, send);
    expect((await o.list()).map((k) => k.file.id).sort()).toEqual(['cut', 'running']);
  });

  it('says which failures a later page may resume', () => {
    expect(resumable(new TransferError('CLOSED', ''))).toBe(true);
    expect(resumable(new TransferError('TIMEOUT', ''))).toBe(true);
    expect(resumable(new TransferError('CLOSED', '', true))).toBe(false);
    expect(resumable(new TransferError('TOO_LARGE', '', true))).toBe(false);
    expect(resumable(new Error('x'))).toBe(false);
  });
});
