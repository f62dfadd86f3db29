import { describe, expect, it } from 'vitest';
import { cacheEntries, cancelFailureShown, initialChat, isRunActive, isSessionCommand, parseCache, recentHistory, reduceChat, runsInProgress, type ChatAction, type ChatState, type WireMessage } from './chat';

// Every run event carries the id the assistant reply will have (messageId), as chat.send returned it.
const base = { profileId: 'main', sessionId: 's1', messageId: 'a1' };

function run(state: ChatState, ...actions: ChatAction[]): ChatState {
  return actions.reduce(reduceChat, state);
}
function ev(event: string, payload: Record<string, unknown>, now = 1000): ChatAction {
  return { type: 'event', event, payload: { ...base, ...payload }, now };
}
function wire(id: string, role: 'user' | 'assistant', content: string, ts: number, extra: Partial<WireMessage> = {}): WireMessage {
  return { id, profileId: 'main', sessionId: 's1', role, content, ts, ...extra };
}

describe('streaming', () => {
  it('thinking shows a streaming entry; chunks out of order are assembled by seq', () => {
    let s = run(initialChat('main'), ev('chat.thinking', { runId: 'r1' }));
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0]).toMatchObject({ role: 'assistant', state: 'streaming', thinking: true, content: '' });

    s = run(
      s,
      ev('chat.chunk', { runId: 'r1', seq: 3, delta: 'C' }),
      ev('chat.chunk', { runId: 'r1', seq: 1, delta: 'A' }),
    );
    expect(s.messages[0].content).toBe('AC');
    expect(s.messages[0].thinking).toBe(false);
    s = run(s, ev('chat.chunk', { runId: 'r1', seq: 2, delta: 'B' }));
    expect(s.messages[0].content).toBe('ABC');
    // A repeated chunk (e.g. replayed after a reconnect) is not appended twice.
    s = run(s, ev('chat.chunk', { runId: 'r1', seq: 2, delta: 'B' }));
    expect(s.messages[0].content).toBe('ABC');
    expect(s.messages).toHaveLength(1);
  });

  it('a chunk without a prior thinking event creates the entry', () => {
    const s = run(initialChat('main'), ev('chat.chunk', { runId: 'r9', seq: 0, delta: '你好' }));
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0]).toMatchObject({ role: 'assistant', state: 'streaming', content: '你好', runId: 'r9' });
  });

  it('keeps separate runs apart', () => {
    const s = run(
      initialChat('main'),
      ev('chat.chunk', { runId: 'a', seq: 1, delta: 'one' }, 1),
      ev('chat.chunk', { runId: 'b', seq: 1, delta: 'two' }, 2),
      ev('chat.chunk', { runId: 'a', seq: 2, delta: '!' }, 3),
    );
    expect(s.messages.map((m) => m.content)).toEqual(['one!', 'two']);
  });

  it('ignores events for other profiles', () => {
    const s = run(initialChat('main'), ev('chat.chunk', { runId: 'x', seq: 1, delta: 'no', profileId: 'writer' }));
    expect(s.messages).toHaveLength(0);
  });

  it('final replaces the streamed text with the persisted message', () => {
    const s = run(
      initialChat('main'),
      ev('chat.chunk', { runId: 'r1', seq: 1, delta: 'partial tex' }),
      ev('chat.final', {
        runId: 'r1',
        message: wire('a1', 'assistant', 'The final answer.', 2000, { runId: 'r1', sources: [{ path: 'memory/x.md', startLine: 3, endLine: 9 }] }),
      }),
      ev('chat.chunk', { runId: 'r1', seq: 2, delta: 'late' }),
    );
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0]).toMatchObject({
      id: 'a1',
      state: 'final',
      content: 'The final answer.',
      sources: [{ path: 'memory/x.md', startLine: 3, endLine: 9 }],
    });
    expect(s.doneRuns).toContain('r1');
  });

  it('a final the gateway cut keeps the whole streamed text; from history it is marked as cut', () => {
    const whole = 'A'.repeat(50) + 'B'.repeat(50);
    const cut = wire('a1', 'assistant', 'A'.repeat(50), 2000, { runId: 'r1', contentTruncated: true, contentBytes: 100 });
    const s = run(
      initialChat('main'),
      ev('chat.chunk', { runId: 'r1', seq: 1, delta: whole.slice(0, 60) }),
      ev('chat.chunk', { runId: 'r1', seq: 2, delta: whole.slice(60) }),
      ev('chat.final', { runId: 'r1', message: cut }),
    );
    expect(s.messages[0]).toMatchObject({ id: 'a1', state: 'final', content: whole });
    expect(s.messages[0].cutFrom).toBeUndefined();
    const h = run(initialChat('main'), ev('chat.final', { runId: 'r1', message: cut }));
    expect(h.messages[0]).toMatchObject({ content: 'A'.repeat(50), cutFrom: 100 });
  });

  it('a late thinking after final does not resurrect the run', () => {
    const s = run(
      initialChat('main'),
      ev('chat.final', { runId: 'r1', message: wire('a1', 'assistant', 'done', 2000, { runId: 'r1' }) }),
      ev('chat.thinking', { runId: 'r1' }),
    );
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0].state).toBe('final');
  });

  it('cancelled keeps the partial text (or the persisted partial message)', () => {
    let s = run(initialChat('main'), ev('chat.chunk', { runId: 'r1', seq: 1, delta: 'half' }), ev('chat.cancelled', { runId: 'r1' }));
    expect(s.messages[0]).toMatchObject({ state: 'cancelled', content: 'half' });

    s = run(
      initialChat('main'),
      ev('chat.chunk', { runId: 'r2', seq: 1, delta: 'ha' }),
      ev('chat.cancelled', { runId: 'r2', message: wire('a2', 'assistant', 'half', 2000, { runId: 'r2' }) }),
    );
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0]).toMatchObject({ id: 'a2', state: 'cancelled', content: 'half' });
  });

  it('error shows the error text, with or without streamed text', () => {
    let s = run(
      initialChat('main'),
      ev('chat.thinking', { runId: 'r1' }),
      ev('chat.error', { runId: 'r1', error: { code: 'UNAVAILABLE', message: 'model unreachable' } }),
    );
    // People see the message; the code stays available (tooltip, logic).
    expect(s.messages[0]).toMatchObject({ state: 'error', error: 'model unreachable', errorCode: 'UNAVAILABLE', thinking: false });

    s = run(initialChat('main'), ev('chat.error', { runId: 'r3', error: { code: 'INTERNAL', message: 'boom' } }));
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0]).toMatchObject({ role: 'assistant', state: 'error' });
  });
});

describe('sending and the active run', () => {
  it('send → sent keys the user message by server id and makes the run active until it ends', () => {
    let s = run(
      initialChat('main'),
      { type: 'send', key: 'local:1', content: 'hi', ts: 500 },
      { type: 'sent', key: 'local:1', userMessageId: 'u1', messageId: 'a1', runId: 'r1', sessionId: 's1' },
    );
    expect(s.messages[0]).toMatchObject({ id: 'u1', role: 'user', state: 'final', pending: false, runId: 'r1' });
    expect(s.activeRunId).toBe('r1');
    expect(s.sessionId).toBe('s1');
    expect(isRunActive(s, s.activeRunId)).toBe(true);
    s = run(s, ev('chat.final', { runId: 'r1', message: wire('a1', 'assistant', 'hello', 900, { runId: 'r1' }) }));
    expect(s.activeRunId).toBeNull();
    expect(s.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it('a run that ended before chat.send answered does not become active', () => {
    const s = run(
      initialChat('main'),
      { type: 'send', key: 'local:1', content: 'hi', ts: 500 },
      ev('chat.final', { runId: 'r1', message: wire('a1', 'assistant', 'quick', 900, { runId: 'r1' }) }),
      { type: 'sent', key: 'local:1', userMessageId: 'u1', messageId: 'a1', runId: 'r1', sessionId: 's1' },
    );
    expect(s.activeRunId).toBeNull();
  });

  it('a streaming run of our own session (after a reload) becomes cancellable', () => {
    const s = run(initialChat('main', 's1'), ev('chat.chunk', { runId: 'r7', seq: 1, delta: 'x' }));
    expect(s.activeRunId).toBe('r7');
    const other = run(initialChat('main', 's2'), ev('chat.chunk', { runId: 'r7', seq: 1, delta: 'x' }));
    expect(other.activeRunId).toBeNull();
  });

  it('send-failed marks the user message as error', () => {
    const s = run(
      initialChat('main'),
      { type: 'send', key: 'local:1', content: 'hi', ts: 500 },
      { type: 'send-failed', key: 'local:1', error: 'UNAVAILABLE: not connected' },
    );
    expect(s.messages[0]).toMatchObject({ state: 'error', error: 'UNAVAILABLE: not connected' });
  });
});

describe('history merge', () => {
  const page: WireMessage[] = [
    wire('u1', 'user', 'question', 100, { runId: 'r1' }),
    wire('a1', 'assistant', 'answer', 200, { runId: 'r1' }),
  ];

  it('merges by id without duplicates, however often it is loaded', () => {
    let s = run(initialChat('main'), { type: 'history', messages: page });
    s = run(s, { type: 'history', messages: page }, { type: 'history', messages: [...page].reverse() });
    expect(s.messages.map((m) => m.id)).toEqual(['u1', 'a1']);
    expect(s.messages.every((m) => m.state === 'final')).toBe(true);
  });

  it('keeps the state of cancelled and failed replies across a reload', () => {
    const s = run(initialChat('main'), {
      type: 'history',
      messages: [
        wire('a1', 'assistant', 'partial answ', 200, { runId: 'r1', error: 'cancelled' }),
        wire('a2', 'assistant', '', 300, { runId: 'r2', error: 'model server is unreachable' }),
      ],
    });
    expect(s.messages.map((m) => m.state)).toEqual(['cancelled', 'error']);
    expect(s.messages[0].error).toBeUndefined();
    expect(s.messages[1].error).toContain('unreachable');
  });

  it('dedupes against messages that arrived live', () => {
    const s = run(
      initialChat('main'),
      { type: 'send', key: 'local:1', content: 'question', ts: 100 },
      { type: 'sent', key: 'local:1', userMessageId: 'u1', messageId: 'a1', runId: 'r1', sessionId: 's1' },
      ev('chat.chunk', { runId: 'r1', seq: 1, delta: 'ans' }, 150),
      ev('chat.final', { runId: 'r1', message: page[1] }),
      { type: 'history', messages: page },
    );
    expect(s.messages.map((m) => m.id)).toEqual(['u1', 'a1']);
  });

  it('replaces a run that was still streaming when the connection dropped', () => {
    const s = run(
      initialChat('main'),
      ev('chat.chunk', { runId: 'r1', seq: 1, delta: 'ans' }, 150),
      { type: 'history', messages: page },
    );
    expect(s.messages).toHaveLength(2);
    expect(s.messages[1]).toMatchObject({ id: 'a1', state: 'final', content: 'answer' });
    expect(s.doneRuns).toContain('r1');
  });

  it('a user message acknowledged after history already brought it is not duplicated', () => {
    const s = run(
      initialChat('main'),
      { type: 'send', key: 'local:1', content: 'question', ts: 100 },
      { type: 'history', messages: [page[0]] },
      { type: 'sent', key: 'local:1', userMessageId: 'u1', messageId: 'a1', runId: 'r1', sessionId: 's1' },
    );
    expect(s.messages.map((m) => m.id)).toEqual(['u1']);
  });

  it('orders by timestamp and inserts older pages before newer messages', () => {
    let s = run(initialChat('main'), { type: 'history', messages: [wire('m3', 'user', 'c', 300)] });
    s = run(s, { type: 'history', messages: [wire('m1', 'user', 'a', 100), wire('m2', 'assistant', 'b', 200)] });
    expect(s.messages.map((m) => m.id)).toEqual(['m1', 'm2', 'm3']);
  });

  it('marks persisted errors and removes deleted messages', () => {
    let s = run(initialChat('main'), {
      type: 'history',
      messages: [...page, wire('a2', 'assistant', '', 300, { error: 'model timed out' })],
    });
    expect(s.messages[2]).toMatchObject({ state: 'error', error: 'model timed out' });
    s = run(s, ev('message.deleted', { messageId: 'a1' }));
    expect(s.messages.map((m) => m.id)).toEqual(['u1', 'a2']);
  });
});

describe('cancel keeps the user message (tester defect: the just-sent message vanished)', () => {
  // The earlier turn of the report: "cancel me" and its cancelled reply.
  const earlier: WireMessage[] = [
    wire('u0', 'user', 'cancel me', 100, { runId: 'r0' }),
    wire('a0', 'assistant', 'par', 200, { runId: 'r0', error: 'cancelled' }),
  ];
  const runEv = { runId: 'r2', sessionId: 's1', messageId: 'a2' };
  // chat.send answers with the reply's id as messageId and the user message's as userMessageId.
  const sendAndStream: ChatAction[] = [
    { type: 'history', messages: earlier },
    { type: 'send', key: 'local:2', content: 'cancel test two', ts: 300, sessionId: 's1' },
    { type: 'sent', key: 'local:2', userMessageId: 'u2', messageId: 'a2', runId: 'r2', sessionId: 's1' },
    ev('chat.thinking', runEv, 301),
    ev('chat.chunk', { ...runEv, seq: 1, delta: 'Once upon' }, 302),
    ev('chat.chunk', { ...runEv, seq: 2, delta: ' a time' }, 303),
  ];
  const cancelled = wire('a2', 'assistant', 'Once upon a time', 304, { runId: 'r2', error: 'cancelled' });

  it('send, ack, thinking, chunks, chat.cancelled with the partial reply, then a history reload', () => {
    let s = run(initialChat('main', 's1'), ...sendAndStream);
    expect(s.activeRunId).toBe('r2');
    // (The Cancel button sends chat.cancel here; the reducer sees only the resulting event.)
    s = run(s, ev('chat.cancelled', { ...runEv, message: cancelled }, 305));
    const view = (st: ChatState) => st.messages.map((m) => [m.role, m.content, m.state, m.id]);
    const want = [
      ['user', 'cancel me', 'final', 'u0'],
      ['assistant', 'par', 'cancelled', 'a0'],
      ['user', 'cancel test two', 'final', 'u2'],
      ['assistant', 'Once upon a time', 'cancelled', 'a2'],
    ];
    expect(view(s)).toEqual(want);
    expect(s.activeRunId).toBeNull();

    s = run(s, { type: 'history', messages: [...earlier, wire('u2', 'user', 'cancel test two', 300, { runId: 'r2' }), cancelled], active: [] });
    expect(view(s)).toEqual(want);
  });

  it('the same with chat.final, and a user message that history brings before the ack names it', () => {
    const s = run(
      initialChat('main', 's1'),
      ...sendAndStream.slice(0, 2),
      { type: 'history', messages: [wire('u2', 'user', 'cancel test two', 300, { runId: 'r2' })] },
      ...sendAndStream.slice(2),
      ev('chat.final', { ...runEv, message: wire('a2', 'assistant', 'Once upon a time.', 304, { runId: 'r2' }) }),
    );
    expect(s.messages.map((m) => [m.role, m.id])).toEqual([
      ['user', 'u0'],
      ['assistant', 'a0'],
      ['user', 'u2'],
      ['assistant', 'a2'],
    ]);
  });

  it('a user message acknowledged without userMessageId merges with its history copy by run', () => {
    const s = run(
      initialChat('main', 's1'),
      { type: 'send', key: 'local:1', content: 'q', ts: 100 },
      { type: 'sent', key: 'local:1', runId: 'r1', sessionId: 's1' },
      { type: 'history', messages: [wire('u1', 'user', 'q', 100, { runId: 'r1' })] },
    );
    expect(s.messages.map((m) => [m.role, m.id, m.key])).toEqual([['user', 'u1', 'local:1']]);
  });
});

describe('re-attach to a run in progress (history.profile active)', () => {
  const user = wire('u1', 'user', 'tell me a story', 100, { runId: 'r1' });
  const snap = (content: string, seq: number, extra: Record<string, unknown> = {}) => ({
    runId: 'r1', profileId: 'main', sessionId: 's1', messageId: 'a1', content, seq, startedAt: 100, ...extra,
  });
  const chunk = (seq: number, delta: string) => ev('chat.chunk', { runId: 'r1', seq, delta });
  const assistant = (s: ChatState) => s.messages.filter((m) => m.role === 'assistant');

  it('a reload mid-stream shows the snapshot and then only later chunks', () => {
    let s = run(initialChat('main', 's1'), { type: 'history', messages: [user], active: [snap('Once upon a time', 3)] });
    expect(s.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(assistant(s)[0]).toMatchObject({ state: 'streaming', content: 'Once upon a time', thinking: false, runId: 'r1', baseSeq: 3 });
    // Our session's run: Cancel works after the reload.
    expect(s.activeRunId).toBe('r1');
    expect(isRunActive(s, s.activeRunId)).toBe(true);

    // Chunks emitted before the snapshot but delivered after it are already included.
    s = run(s, chunk(2, ' upon'), chunk(3, ' a time'), chunk(5, ' lived'), chunk(4, ', there'));
    expect(assistant(s)[0].content).toBe('Once upon a time, there lived');
    expect(s.messages).toHaveLength(2);
  });

  it('chunks received before the history response: those covered by the snapshot are not doubled, later ones kept', () => {
    // A reconnect: chunks 1..2 were seen, 3 was missed, 4..5 arrived before the history answer.
    let s = run(
      initialChat('main', 's1'),
      { type: 'history', messages: [user] },
      chunk(1, 'Once'),
      chunk(2, ' upon'),
      chunk(4, ' time'),
      chunk(5, ','),
    );
    expect(assistant(s)[0].content).toBe('Once upon time,');
    s = run(s, { type: 'history', messages: [user], active: [snap('Once upon a time', 4)] });
    expect(assistant(s)).toHaveLength(1);
    expect(assistant(s)[0].content).toBe('Once upon a time,');
    // Replays and an older snapshot change nothing.
    s = run(s, chunk(3, ' a'), chunk(5, ','), { type: 'history', messages: [user], active: [snap('Once upon', 2)] });
    expect(assistant(s)[0].content).toBe('Once upon a time,');
    s = run(s, chunk(6, ' the end'));
    expect(assistant(s)[0].content).toBe('Once upon a time, the end');
  });

  it('a snapshot with no text yet shows the thinking indicator', () => {
    const s = run(initialChat('main', 's1'), { type: 'history', messages: [user], active: [snap('', 0)] });
    expect(assistant(s)[0]).toMatchObject({ state: 'streaming', content: '', thinking: true });
    expect(run(s, chunk(1, 'Hi')).messages[1].content).toBe('Hi');
  });

  it('final after the snapshot replaces the streamed text; the run is not resurrected', () => {
    let s = run(initialChat('main', 's1'), { type: 'history', messages: [user], active: [snap('Once upon', 2)] }, chunk(3, ' a time'));
    const fin = wire('a1', 'assistant', 'Once upon a time.', 400, { runId: 'r1' });
    s = run(s, ev('chat.final', { runId: 'r1', message: fin }));
    expect(assistant(s)).toHaveLength(1);
    expect(assistant(s)[0]).toMatchObject({ id: 'a1', state: 'final', content: 'Once upon a time.' });
    expect(s.activeRunId).toBeNull();
    // A stale snapshot (a history answer sent before the final) does not bring it back.
    s = run(s, { type: 'history', messages: [user], active: [snap('Once upon a time', 3)] });
    expect(assistant(s)).toHaveLength(1);
    expect(assistant(s)[0].state).toBe('final');
  });

  it('a run whose reply is already in the page is not attached; other sessions are shown but not cancellable', () => {
    const stored = wire('a1', 'assistant', 'done', 300, { runId: 'r1' });
    let s = run(initialChat('main', 's1'), { type: 'history', messages: [user, stored], active: [snap('do', 1)] });
    expect(s.messages.map((m) => [m.role, m.state])).toEqual([['user', 'final'], ['assistant', 'final']]);
    expect(s.activeRunId).toBeNull();

    s = run(initialChat('main', 's1'), { type: 'history', messages: [], active: [snap('elsewhere', 1, { runId: 'r9', sessionId: 's2' })] });
    expect(assistant(s)[0]).toMatchObject({ state: 'streaming', content: 'elsewhere' });
    expect(s.activeRunId).toBeNull();
    s = run(initialChat('main', 's1'), { type: 'history', messages: [], active: [snap('x', 1, { profileId: 'writer' })] });
    expect(s.messages).toHaveLength(0);
  });
});

const view = (st: ChatState) => st.messages.map((m) => `${m.role[0]}:${m.content}:${m.state}`);

describe('every client sees the question (chat.thinking carries userMessage)', () => {
  const q = wire('u1', 'user', 'What is QK-7731?', 1000, { runId: 'r1' });
  const thinking = ev('chat.thinking', { runId: 'r1', messageId: 'a1', userMessage: q }, 99_000);

  it('another tab shows the question above the streaming answer', () => {
    const s = run(initialChat('main', 'other-session'), thinking, ev('chat.chunk', { runId: 'r1', seq: 1, delta: 'The launch code' }, 99_001));
    expect(view(s)).toEqual(['u:What is QK-7731?:final', 'a:The launch code:streaming']);
    expect(s.messages[0]).toMatchObject({ id: 'u1', runId: 'r1' });
    // The live reply takes the question's server ts + 1, as it will be stored.
    expect(s.messages[1].ts).toBe(1001);
    // Not our session: nothing to cancel here.
    expect(s.activeRunId).toBeNull();
  });

  it('the sender keeps one copy, whether the ack or the event comes first', () => {
    const send: ChatAction = { type: 'send', key: 'local:1', content: 'What is QK-7731?', ts: 5_000, sessionId: 's1' };
    const sent: ChatAction = { type: 'sent', key: 'local:1', userMessageId: 'u1', messageId: 'a1', runId: 'r1', sessionId: 's1' };
    for (const order of [[send, sent, thinking], [send, thinking, sent]]) {
      const s = run(initialChat('main', 's1'), ...order);
      expect(s.messages.map((m) => [m.role, m.id, m.key])).toEqual([
        ['user', 'u1', 'local:1'],
        ['assistant', null, 'run:r1'],
      ]);
      // The local clock (5000) gave way to the server's ts.
      expect(s.messages[0]).toMatchObject({ ts: 1000, pending: false });
      expect(s.activeRunId).toBe('r1');
    }
  });

  it('an identical question of another run taken for ours is given back when the ack names ours', () => {
    const s = run(
      initialChat('main', 's1'),
      { type: 'send', key: 'local:1', content: 'What is QK-7731?', ts: 5_000, sessionId: 's1' },
      thinking, // another tab's run, same text and session
      { type: 'sent', key: 'local:1', userMessageId: 'u2', messageId: 'a2', runId: 'r2', sessionId: 's1' },
    );
    expect(s.messages.filter((m) => m.role === 'user').map((m) => [m.id, m.runId]).sort()).toEqual([
      ['u1', 'r1'],
      ['u2', 'r2'],
    ]);
  });

  it('...and a refused send does not turn the other run\'s question into an error', () => {
    const s = run(
      initialChat('main', 's1'),
      { type: 'send', key: 'local:1', content: 'What is QK-7731?', ts: 5_000, sessionId: 's1' },
      thinking,
      { type: 'send-failed', key: 'local:1', error: 'session s1 is still answering the previous message', code: 'CONFLICT' },
    );
    const users = s.messages.filter((m) => m.role === 'user');
    expect(users.map((m) => [m.id, m.state])).toEqual([
      [null, 'error'],
      ['u1', 'final'],
    ]);
    expect(users[0]).toMatchObject({ errorCode: 'CONFLICT', error: 'session s1 is still answering the previous message' });
  });

  it('a later history reload adds nothing', () => {
    let s = run(initialChat('main'), thinking, ev('chat.final', { runId: 'r1', message: wire('a1', 'assistant', 'A code.', 1001, { runId: 'r1' }) }));
    s = run(s, { type: 'history', messages: [q, wire('a1', 'assistant', 'A code.', 1001, { runId: 'r1' })] });
    expect(view(s)).toEqual(['u:What is QK-7731?:final', 'a:A code.:final']);
  });
});

describe('order: each answer right after its question (tester defect: pairs came apart after a reload)', () => {
  // Two sessions overlap: B starts after A, B is cancelled first, A ends last. Stored ts follow the
  // server's rule: questions 1000 and 1002, answers = question + 1 whatever their end time.
  const uA = wire('uA', 'user', 'A?', 1000, { runId: 'rA', sessionId: 'sa' });
  const uB = wire('uB', 'user', 'B?', 1002, { runId: 'rB', sessionId: 'sb' });
  const aA = wire('aA', 'assistant', 'answer A', 1001, { runId: 'rA', sessionId: 'sa' });
  const aB = wire('aB', 'assistant', 'half B', 1003, { runId: 'rB', sessionId: 'sb', error: 'cancelled' });
  const want = ['u:A?:final', 'a:answer A:final', 'u:B?:final', 'a:half B:cancelled'];

  it('live view and history agree', () => {
    const live = run(
      initialChat('main'),
      ev('chat.thinking', { runId: 'rA', sessionId: 'sa', messageId: 'aA', userMessage: uA }, 50_000),
      ev('chat.chunk', { runId: 'rA', sessionId: 'sa', messageId: 'aA', seq: 1, delta: 'answer' }, 50_001),
      ev('chat.thinking', { runId: 'rB', sessionId: 'sb', messageId: 'aB', userMessage: uB }, 50_002),
      ev('chat.chunk', { runId: 'rB', sessionId: 'sb', messageId: 'aB', seq: 1, delta: 'half B' }, 50_003),
      ev('chat.cancelled', { runId: 'rB', sessionId: 'sb', messageId: 'aB', reason: 'cancelled', message: aB }, 50_004),
      ev('chat.final', { runId: 'rA', sessionId: 'sa', messageId: 'aA', message: aA }, 50_005),
    );
    expect(view(live)).toEqual(want);
    // A fresh tab reads the stored page (oldest first, as the server orders it) ...
    expect(view(run(initialChat('main'), { type: 'history', messages: [uA, aA, uB, aB] }))).toEqual(want);
    // ... and the live tab merging it changes nothing.
    expect(view(run(live, { type: 'history', messages: [uA, aA, uB, aB] }))).toEqual(want);
  });

  it('a reply settles at its stored ts even when it streamed in before its question was known', () => {
    const s = run(
      initialChat('main'),
      ev('chat.chunk', { runId: 'rA', sessionId: 'sa', messageId: 'aA', seq: 1, delta: 'answer A' }, 90_000),
      { type: 'history', messages: [uA, uB] },
      ev('chat.final', { runId: 'rA', sessionId: 'sa', messageId: 'aA', message: aA }, 90_001),
    );
    expect(view(s)).toEqual(['u:A?:final', 'a:answer A:final', 'u:B?:final']);
  });
});

describe('a reply takes its stored state (tester defect: an interrupted run showed as final)', () => {
  const q = wire('u1', 'user', 'long story', 1000, { runId: 'r1', sessionId: 's1' });
  const streaming = (): ChatState =>
    run(
      initialChat('main', 's1'),
      { type: 'history', messages: [q] },
      ev('chat.thinking', { runId: 'r1', userMessage: q }),
      ev('chat.chunk', { runId: 'r1', seq: 1, delta: 'Once upon' }),
    );

  it('a streaming reply replaced by a stored cancelled / interrupted / failed one shows that state', () => {
    for (const [error, state] of [['cancelled', 'cancelled'], ['interrupted', 'interrupted'], ['model went away', 'error']]) {
      const s = run(streaming(), { type: 'history', messages: [q, wire('a1', 'assistant', 'Once upon', 1001, { runId: 'r1', error })], active: [] });
      expect(s.messages[1]).toMatchObject({ id: 'a1', state, content: 'Once upon' });
      expect(s.activeRunId).toBeNull();
      expect(isRunActive(s, 'r1')).toBe(false);
    }
  });

  it('a stored state also replaces a final the live view had set', () => {
    let s = run(streaming(), ev('chat.final', { runId: 'r1' })); // a final without its message
    expect(s.messages[1].state).toBe('final');
    s = run(s, { type: 'history', messages: [q, wire('a1', 'assistant', 'Once upon', 1001, { runId: 'r1', error: 'interrupted' })] });
    expect(s.messages[1].state).toBe('interrupted');
  });

  it('chat.cancelled with reason interrupted (server shutdown) ends the run as interrupted, with or without text', () => {
    let s = run(streaming(), ev('chat.cancelled', { runId: 'r1', reason: 'interrupted', message: wire('a1', 'assistant', 'Once upon', 1001, { runId: 'r1', error: 'interrupted' }) }));
    expect(s.messages[1]).toMatchObject({ state: 'interrupted', content: 'Once upon' });
    s = run(initialChat('main'), ev('chat.thinking', { runId: 'r2' }), ev('chat.cancelled', { runId: 'r2', reason: 'interrupted' }));
    expect(s.messages[0].state).toBe('interrupted');
  });

  it('a run the restarted server no longer knows (not active, nothing stored) ends as interrupted', () => {
    let s = streaming();
    expect(s.activeRunId).toBe('r1');
    const known = runsInProgress(s);
    expect(known).toEqual(['r1']);
    // Meanwhile another run started, after the request: it is not in `known` and stays streaming.
    s = run(s, ev('chat.thinking', { runId: 'r9', sessionId: 'x' }, 2000));
    s = run(s, { type: 'history', messages: [q], active: [], known });
    expect(view(s)).toEqual(['u:long story:final', 'a:Once upon:interrupted', 'a::streaming']);
    expect(s.activeRunId).toBeNull();
    // A terminal event that still arrives sets the real outcome.
    s = run(s, ev('chat.cancelled', { runId: 'r1', reason: 'cancelled' }));
    expect(s.messages[1].state).toBe('cancelled');
  });

  it('a known run still listed as active keeps streaming', () => {
    const s0 = streaming();
    const s = run(s0, {
      type: 'history',
      messages: [q],
      active: [{ runId: 'r1', profileId: 'main', sessionId: 's1', messageId: 'a1', content: 'Once upon a', seq: 2, startedAt: 1000 }],
      known: runsInProgress(s0),
    });
    expect(view(s)).toEqual(['u:long story:final', 'a:Once upon a:streaming']);
    expect(s.activeRunId).toBe('r1');
  });
});

describe('cancelFailureShown', () => {
  it('hides NOT_FOUND (the run ended before the cancel reached it) and shows other errors', () => {
    expect(cancelFailureShown({ code: 'NOT_FOUND', message: 'no such run' })).toBe(false);
    expect(cancelFailureShown({ code: 'UNAVAILABLE', message: 'connection lost' })).toBe(true);
    expect(cancelFailureShown(new Error('boom'))).toBe(true);
  });
});

describe('pictures', () => {
  const id1 = '0123456789abcdef0123456789abcdef';
  const id2 = 'fedcba9876543210fedcba9876543210';
  it('a final answer shows the pictures its tool calls returned, once each, by media id; survives the cache', () => {
    const tools = [
      { callId: 'c1', tool: 'nodes', images: [{ path: '/h/media/x.jpg', mime: 'image/jpeg', mediaId: id1, width: 640, height: 480 }] },
      { callId: 'c2', tool: 'nodes', images: [{ path: '/h/media/x.jpg', mediaId: id1 }, { path: '/ws/a.png', mime: 'image/png', mediaId: id2 }] },
      { callId: 'c3', tool: 'read_file', images: [{ path: '/ws/b.png', mime: 'image/png' }, { mediaId: '../../etc/passwd' }] },
    ];
    let s = run(initialChat('main'), ev('chat.thinking', { runId: 'r1' }));
    s = run(s, ev('chat.final', { runId: 'r1', message: wire('a1', 'assistant', 'A dark window.', 2000, { runId: 'r1', tools }) }));
    expect(s.messages[0].images).toEqual([
      { mediaId: id1, mime: 'image/jpeg', width: 640, height: 480 },
      { mediaId: id2, mime: 'image/png' },
    ]);
    const again = run(initialChat('main'), { type: 'cache', messages: parseCache(JSON.stringify(cacheEntries(s))) });
    expect(again.messages[0].images).toEqual(s.messages[0].images);
  });
  it('a message without pictures has none', () => {
    const s = run(initialChat('main'), { type: 'cache', messages: [wire('a1', 'assistant', 'x', 1, { tools: [{ callId: 'c', tool: 't' }] })] });
    expect(s.messages[0].images).toBeUndefined();
  });
});

describe('heartbeat turns (issue 24 item 7)', () => {
  const hb = { sessionId: 'heartbeat', heartbeat: true };
  const prompt = wire('u-hb', 'user', 'Read HEARTBEAT.md if it exists …', 900, { sessionId: 'heartbeat' });
  it('HEARTBEAT_OK stays silent: nothing of the run is shown, not even while it streams', () => {
    const s = run(
      initialChat('main'),
      ev('chat.thinking', { ...hb, runId: 'h1', userMessage: prompt }),
      ev('chat.chunk', { ...hb, runId: 'h1', seq: 1, delta: 'HEARTBEAT_OK' }),
      ev('chat.final', { ...hb, runId: 'h1', silent: true, message: wire('a-h1', 'assistant', 'HEARTBEAT_OK', 901, { sessionId: 'heartbeat', runId: 'h1' }) }),
    );
    expect(s.messages).toEqual([]);
  });
  it('another answer is shown once it is in, as main\'s message, without the prompt', () => {
    const s = run(
      initialChat('main'),
      ev('chat.thinking', { ...hb, runId: 'h2', userMessage: prompt }),
      ev('chat.chunk', { ...hb, runId: 'h2', seq: 1, delta: 'Your 3 pm' }),
      ev('chat.final', { ...hb, runId: 'h2', message: wire('a-h2', 'assistant', 'Your 3 pm meeting moved.', 901, { sessionId: 'heartbeat', runId: 'h2' }) }),
    );
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0]).toMatchObject({ role: 'assistant', state: 'final', content: 'Your 3 pm meeting moved.', sessionId: 'heartbeat' });
  });
});

describe('session reset (/new, /reset, daily and idle resets: chat.reset)', () => {
  const stored = (id: string, role: 'user' | 'assistant', content: string, ts: number, sessionId: string): WireMessage =>
    ({ id, profileId: 'main', sessionId, role, content, ts }) as WireMessage;
  const start = (): ChatState =>
    reduceChat(initialChat('main', 's-old'), {
      type: 'history',
      messages: [stored('u1', 'user', 'How do we deploy?', 1000, 's-old'), stored('a1', 'assistant', 'Blue-green.', 1001, 's-old')],
    });

  it('recognises only the whole commands', () => {
    expect(isSessionCommand(' /NEW ')).toBe(true);
    expect(isSessionCommand('/reset')).toBe(true);
    expect(isSessionCommand('/new plan')).toBe(false);
    expect(isSessionCommand('please /new')).toBe(false);
  });

  it('moves to the new session, keeps the old messages shown and stops sending them as history', () => {
    const before = start();
    expect(recentHistory(before).map((m) => m.id)).toEqual(['u1', 'a1']);
    const after = reduceChat(before, {
      type: 'reset',
      own: true,
      now: 2000,
      reset: { profileId: 'main', closedSessionId: 's-old', sessionId: 's-new', reason: 'command', note: 'memory/roles/main/x.md' },
    });
    expect(after.sessionId).toBe('s-new');
    expect(after.messages).toHaveLength(2);
    expect(after.reset?.note).toBe('memory/roles/main/x.md');
    expect(recentHistory(after)).toEqual([]);
    const next = reduceChat(after, { type: 'history', messages: [stored('u2', 'user', 'Fresh', 3000, 's-new')] });
    expect(recentHistory(next).map((m) => m.id)).toEqual(['u2']);
  });

  it('follows an automatic reset of its own session only', () => {
    const s = start();
    const other = reduceChat(s, { type: 'reset', now: 2000, reset: { profileId: 'main', closedSessionId: 's-other', sessionId: 'x', reason: 'idle' } });
    expect(other).toBe(s);
    const otherProfile = reduceChat(s, { type: 'reset', now: 2000, reset: { profileId: 'writer-1', closedSessionId: 's-old', sessionId: 'x', reason: 'idle' } });
    expect(otherProfile).toBe(s);
    const mine = reduceChat(s, { type: 'reset', now: 2000, reset: { profileId: 'main', closedSessionId: 's-old', sessionId: 's-day', reason: 'daily' } });
    expect(mine.sessionId).toBe('s-day');
    expect(mine.reset?.reason).toBe('daily');
  });
});

describe('a session started by a talk (issue 27)', () => {
  it('is adopted by a panel with no session, never over one it has', () => {
    const fresh = reduceChat(initialChat('main'), { type: 'session', sessionId: 's-talk' });
    expect(fresh.sessionId).toBe('s-talk');
    const held = reduceChat(initialChat('main', 's-1'), { type: 'session', sessionId: 's-talk' });
    expect(held.sessionId).toBe('s-1');
  });
});
