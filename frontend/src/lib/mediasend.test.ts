import { describe, expect, it } from 'vitest';
import { hashMsgs, hex, indexedMsg, jsonMsg, needed, parseMsg, pickBlockSize, TransferError, HEADER_LEN } from './mediasend';

describe('media transfer framing (backend/rtc)', () => {
  it('encodes a block as type, uint32 big-endian index, bytes', () => {
    const m = indexedMsg('B', 0x01020304, new Uint8Array([9, 8]));
    expect(Array.from(m)).toEqual(['B'.charCodeAt(0), 1, 2, 3, 4, 9, 8]);
  });

  it('splits the block hashes into H messages of at most per digests', () => {
    const digests = [0, 1, 2, 3, 4].map((k) => new Uint8Array(32).fill(k));
    const ms = hashMsgs(digests, 2);
    expect(ms.map((m) => m.length)).toEqual([HEADER_LEN + 64, HEADER_LEN + 64, HEADER_LEN + 32]);
    expect(new DataView(ms[2].buffer).getUint32(1)).toBe(4);
    expect(ms[1][HEADER_LEN + 32]).toBe(3);
  });

  it('parses the JSON messages and refuses malformed ones', () => {
    expect(parseMsg(jsonMsg('N', { ranges: [[0, 2]] }))).toEqual({ type: 'N', body: { ranges: [[0, 2]] } });
    expect(parseMsg(new Uint8Array(['E'.charCodeAt(0)]))).toEqual({ type: 'E' });
    expect(() => parseMsg(new Uint8Array(['X'.charCodeAt(0), 123]))).toThrow(TransferError);
    expect(() => parseMsg(new Uint8Array())).toThrow(TransferError);
  });

  it('expands need ranges and refuses ranges outside the file', () => {
    expect(needed({ ranges: [[0, 2], [5, 6]] }, 6)).toEqual([0, 1, 5]);
    for (const bad of [{}, { ranges: [[0, 7]] }, { ranges: [[3, 3]] }, { ranges: [[-1, 1]] }, { ranges: [['a', 1]] }]) {
      expect(() => needed(bad, 6)).toThrow(TransferError);
    }
  });

  it("takes the block size from the peer's maxMessageSize", () => {
    expect(pickBlockSize(65536, 262144)).toBe(65536);
    expect(pickBlockSize(1 << 20, 262144)).toBe(262144 - HEADER_LEN);
    expect(pickBlockSize(65536, null)).toBe(65536);
    expect(pickBlockSize(65536, 16384)).toBe(16384 - HEADER_LEN);
  });

  it('hex-encodes digests', () => {
    expect(hex(new Uint8Array([0, 15, 255]))).toBe('000fff');
  });
});
