import { describe, expect, it } from 'vitest';
import {
  cacheEntries,
  HISTORY_CHARS,
  HISTORY_MESSAGE_CHARS,
  initialChat,
  parseCache,
  recentHistory,
  reduceChat,
  storedIds,
  type ChatAction,
  type ChatState,
  type WireMessage,
} from './chat';

function run(state: ChatState, ...actions: ChatAction[]): ChatState {
  return actions.reduce(reduceChat, state);
}
function wire(id: string, role: 'user' | 'assistant', content: string, ts: number, extra: Partial<WireMessage> = {}): WireMessage {
  return { id, profileId: 'main', sessionId: 's1', role, content, ts, ...extra };
}
const ids = (s: ChatState) => s.messages.map((m) => m.id);

describe('local cache merged with server history by id and timestamp', () => {
  const cached = [wire('u1', 'user', 'q1', 100, { runId: 'r1' }), wire('a1', 'assistant', 'a1', 101, { runId: 'r1' })];

  it('round-trips stored messages, states included, and skips what is not stored', () => {
    let s = run(
      initialChat('main'),
      { type: 'cache', messages: [...cached, wire('a2', 'assistant', 'par', 201, { runId: 'r2', error: 'cancelled' })] },
      { type: 'send', key: 'local:1', content: 'unsent', ts: 300 },
    );
    const out = cacheEntries(s);
    expect(out.map((m) => m.id)).toEqual(['u1', 'a1', 'a2']);
    expect(out[2].error).toBe('cancelled');
    s = run(initialChat('main'), { type: 'cache', messages: parseCache(JSON.stringify(out)) });
    expect(s.messages.map((m) => [m.id, m.state])).toEqual([['u1', 'final'], ['a1', 'final'], ['a2', 'cancelled']]);
    expect(parseCache('{not json')).toEqual([]);
    expect(parseCache(JSON.stringify([{ role: 'user' }, cached[0]])).map((m) => m.id)).toEqual(['u1']);
  });

  it('keeps only the newest messages in the cache', () => {
    const many = Array.from({ length: 7 }, (_, i) => wire(`m${i}`, 'user', `t${i}`, i + 1));
    const s = run(initialChat('main'), { type: 'cache', messages: many });
    expect(cacheEntries(s, 3).map((m) => m.id)).toEqual(['m4', 'm5', 'm6']);
  });

  it('merges the server page into the cache without duplicates, in timestamp order', () => {
    let s = run(initialChat('main'), { type: 'cache', messages: cached });
    const present = storedIds(s);
    s = run(s, {
      type: 'history',
      messages: [wire('u0', 'user', 'older', 50), ...cached, wire('u2', 'user', 'from another device', 150)],
      present,
    });
    expect(ids(s)).toEqual(['u0', 'u1', 'a1', 'u2']);
  });

  it('drops a cached message the complete server timeline no longer has (deleted while away)', () => {
    let s = run(initialChat('main'), { type: 'cache', messages: cached });
    s = run(s, { type: 'history', messages: [cached[1]], present: storedIds(s), hasOlder: false });
    expect(ids(s)).toEqual(['a1']);
  });

  it('keeps cached messages older than a partial page, and messages that arrived after the request', () => {
    let s = run(initialChat('main'), {
      type: 'cache',
      messages: [wire('old', 'user', 'beyond the page', 10), ...cached, wire('gone', 'user', 'deleted elsewhere', 120)],
    });
    const present = storedIds(s);
    // While the request is out, a question arrives live (stored after the page was read).
    s = run(s, {
      type: 'event',
      event: 'chat.thinking',
      payload: { runId: 'r9', profileId: 'main', sessionId: 's2', messageId: 'a9', userMessage: wire('u9', 'user', 'live', 500, { runId: 'r9' }) },
      now: 500,
    });
    s = run(s, { type: 'history', messages: cached, present, hasOlder: true });
    // "old" is older than the page (may be on an older page): kept; "gone" is inside it: dropped.
    expect(ids(s)).toEqual(['old', 'u1', 'a1', 'u9', null]);
  });

  it('keeps the messages of a run the page lists as active (they cannot be deleted mid-run)', () => {
    let s = run(initialChat('main'), { type: 'cache', messages: [cached[0], wire('x', 'user', 'deleted elsewhere', 90)] });
    s = run(s, {
      type: 'history',
      messages: [],
      active: [{ runId: 'r1', profileId: 'main', sessionId: 's1', messageId: 'a1', content: 'so far', seq: 1, startedAt: 100 }],
      present: storedIds(s),
    });
    expect(s.messages.map((m) => [m.id, m.state, m.content])).toEqual([
      ['u1', 'final', 'q1'],
      [null, 'streaming', 'so far'],
    ]);
  });
});

describe('message.deleted', () => {
  it('removes the message in every open tab, and a repeat changes nothing', () => {
    const page = [wire('u1', 'user', 'q', 100), wire('a1', 'assistant', 'a', 101)];
    const tabs = [0, 1].map(() => run(initialChat('main'), { type: 'history', messages: page }));
    const ev: ChatAction = { type: 'event', event: 'message.deleted', payload: { messageId: 'u1', profileId: 'main' }, now: 0 };
    const after = tabs.map((t) => run(t, ev));
    for (const t of after) expect(ids(t)).toEqual(['a1']);
    expect(run(after[0], ev)).toBe(after[0]);
    expect(cacheEntries(after[1]).map((m) => m.id)).toEqual(['a1']);
  });
});

describe('recent history for chat.send', () => {
  it('sends stored messages with text, oldest first, with ids', () => {
    const s = run(
      initialChat('main'),
      {
        type: 'history',
        messages: [
          wire('u1', 'user', 'q1', 100),
          wire('a1', 'assistant', '', 101, { error: 'model timed out' }),
          wire('u2', 'user', 'q2', 200),
          wire('a2', 'assistant', 'a2', 201),
        ],
      },
      { type: 'send', key: 'local:1', content: 'pending', ts: 300 },
    );
    expect(recentHistory(s)).toEqual([
      { id: 'u1', role: 'user', content: 'q1', ts: 100 },
      { id: 'u2', role: 'user', content: 'q2', ts: 200 },
      { id: 'a2', role: 'assistant', content: 'a2', ts: 201 },
    ]);
    expect(recentHistory(s, 2).map((m) => m.id)).toEqual(['u2', 'a2']);
  });

  it('stays within the server caps', () => {
    const big = 'x'.repeat(HISTORY_MESSAGE_CHARS + 10);
    const msgs = Array.from({ length: 8 }, (_, i) => wire(`m${i}`, i % 2 ? 'assistant' : 'user', big, i + 1));
    const h = recentHistory(run(initialChat('main'), { type: 'history', messages: msgs }));
    expect(h.every((m) => m.content.length === HISTORY_MESSAGE_CHARS)).toBe(true);
    expect(h.reduce((n, m) => n + m.content.length, 0)).toBeLessThanOrEqual(HISTORY_CHARS);
    expect(h.map((m) => m.id)).toEqual(['m4', 'm5', 'm6', 'm7']);
  });
});
