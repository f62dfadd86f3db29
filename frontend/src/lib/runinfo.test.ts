import { describe, expect, it } from 'vitest';
import { MAX_RUNS, agentStateLabel, initialRunInfo, reduceRunInfo, statusLine, type RunInfoState } from './runinfo';

const base = (runId: string, profileId = 'main') => ({ runId, profileId, sessionId: 's', messageId: `a-${runId}` });
const play = (events: Array<[string, unknown]>, s: RunInfoState = initialRunInfo('main')) =>
  events.reduce((st, [e, p]) => reduceRunInfo(st, e, p), s);

describe('reasoning folding by runId', () => {
  it('joins each run\'s deltas apart, ignores other profiles and empty deltas', () => {
    const s = play([
      ['chat.reasoning', { ...base('r1'), delta: 'First I ' }],
      ['chat.reasoning', { ...base('r2'), delta: '另一个' }],
      ['chat.reasoning', { ...base('r1'), delta: 'search memory.' }],
      ['chat.reasoning', { ...base('r1'), delta: '' }],
      ['chat.reasoning', { ...base('r3', 'writer'), delta: 'not ours' }],
      ['chat.reasoning', { profileId: 'main', delta: 'no run' }],
    ]);
    expect(s.runs.r1.reasoning).toBe('First I search memory.');
    expect(s.runs.r2.reasoning).toBe('另一个');
    expect(s.runs.r3).toBeUndefined();
    expect(s.order).toEqual(['r1', 'r2']);
  });
  it('keeps the reasoning after the run ends', () => {
    const s = play([
      ['chat.reasoning', { ...base('r1'), delta: 'think' }],
      ['chat.final', { ...base('r1'), message: { id: 'a', role: 'assistant', content: 'x', ts: 1 } }],
    ]);
    expect(s.runs.r1).toMatchObject({ reasoning: 'think', ended: true });
  });
  it('drops the oldest runs past MAX_RUNS', () => {
    const events: Array<[string, unknown]> = [];
    for (let i = 0; i <= MAX_RUNS; i++) events.push(['chat.reasoning', { ...base(`r${i}`), delta: 'x' }]);
    const s = play(events);
    expect(s.order).toHaveLength(MAX_RUNS);
    expect(s.runs.r0).toBeUndefined();
    expect(s.runs[`r${MAX_RUNS}`]).toBeDefined();
  });
  it('a terminal event of an unknown run adds nothing', () => {
    expect(play([['chat.final', base('r1')]]).order).toEqual([]);
  });
});

describe('tool calls', () => {
  it.each([
    {
      name: 'call then result',
      events: [
        ['chat.tool', { ...base('r1'), callId: 'c1', tool: 'memory_search', phase: 'call', argsSummary: 'query=会议' }],
        ['chat.tool', { ...base('r1'), callId: 'c1', tool: 'memory_search', phase: 'result', status: 'ok', summary: '3 results' }],
      ],
      want: [{ callId: 'c1', tool: 'memory_search', argsSummary: 'query=会议', status: 'ok', summary: '3 results' }],
    },
    {
      name: 'a result without its call, and a denied one',
      events: [['chat.tool', { ...base('r1'), callId: 'c2', tool: 'exec', phase: 'result', status: 'denied', summary: 'the person said no' }]],
      want: [{ callId: 'c2', tool: 'exec', status: 'denied', summary: 'the person said no' }],
    },
    {
      name: 'a repeated call event does not reset a result',
      events: [
        ['chat.tool', { ...base('r1'), callId: 'c1', tool: 't', phase: 'call' }],
        ['chat.tool', { ...base('r1'), callId: 'c1', tool: 't', phase: 'result', status: 'error' }],
        ['chat.tool', { ...base('r1'), callId: 'c1', tool: 't', phase: 'call' }],
      ],
      want: [{ callId: 'c1', tool: 't', status: 'error' }],
    },
    {
      name: 'two calls in order; an unknown status reads ok; no callId is ignored',
      events: [
        ['chat.tool', { ...base('r1'), callId: 'a', tool: 'read_file', phase: 'call' }],
        ['chat.tool', { ...base('r1'), callId: 'b', tool: 'web_fetch', phase: 'call' }],
        ['chat.tool', { ...base('r1'), callId: 'a', phase: 'result', status: 'weird' }],
        ['chat.tool', { ...base('r1'), tool: 'x', phase: 'call' }],
      ],
      want: [
        { callId: 'a', tool: 'read_file', status: 'ok' },
        { callId: 'b', tool: 'web_fetch', status: 'running' },
      ],
    },
  ])('$name', ({ events, want }) => {
    expect(play(events as Array<[string, unknown]>).runs.r1.tools).toEqual(want);
  });
});

describe('agent state', () => {
  it('follows transitions, ignores late older ones, and shows a status line while active', () => {
    let s = play([
      ['agent.state', { ...base('r1'), from: 'idle', to: 'analyzing', at: 10, source: 'loop' }],
      ['agent.state', { ...base('r1'), from: 'planning', to: 'acting', at: 30, source: 'loop' }],
      ['agent.state', { ...base('r1'), from: 'analyzing', to: 'planning', at: 20, source: 'loop' }],
      ['chat.tool', { ...base('r1'), callId: 'c1', tool: 'memory_search', phase: 'call' }],
    ]);
    expect(s.runs.r1.agentState).toBe('acting');
    expect(statusLine(s.runs.r1)).toBe('Running a tool: memory_search');
    s = play([['chat.tool', { ...base('r1'), callId: 'c1', phase: 'result', status: 'ok' }], ['agent.state', { ...base('r1'), to: 'reporting', at: 40 }]], s);
    expect(statusLine(s.runs.r1)).toBe('Writing the answer');
    s = play([['chat.cancelled', base('r1')]], s);
    expect(statusLine(s.runs.r1)).toBe('');
    expect(statusLine(undefined)).toBe('');
    expect(agentStateLabel('mystery')).toBe('mystery');
  });
});
