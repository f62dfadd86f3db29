import { describe, expect, it } from 'vitest';
import {
  answerHolds,
  current,
  formatCountdown,
  initialPermissions,
  levelLabel,
  parseRequest,
  reasonText,
  reducePermissions,
  secondsLeft,
  type PermissionAction,
  type PermissionState,
} from './permissions';
import { resetLang, setLang } from './i18n.svelte';

const req = (id: string, at: number, expires = at + 60_000, extra: Record<string, unknown> = {}) => ({
  id,
  kind: 'level',
  runId: `r-${id}`,
  profileId: 'main',
  sessionId: 's',
  messageId: `a-${id}`,
  tool: 'exec',
  callId: `c-${id}`,
  level: 'L2',
  argsSummary: 'ls -la',
  reason: 'run programs',
  at,
  expires,
  ...extra,
});
const apply = (s: PermissionState, ...a: PermissionAction[]) => a.reduce(reducePermissions, s);
const ids = (s: PermissionState) => s.open.map((r) => r.id);

describe('permission prompt lifecycle', () => {
  it.each<{ name: string; actions: PermissionAction[]; want: string[] }>([
    { name: 'asked opens, oldest first', actions: [{ type: 'asked', request: req('b', 20), now: 0 }, { type: 'asked', request: req('a', 10), now: 0 }], want: ['a', 'b'] },
    { name: 'a repeat does not duplicate', actions: [{ type: 'asked', request: req('a', 10), now: 0 }, { type: 'asked', request: req('a', 10), now: 0 }], want: ['a'] },
    { name: 'answered from any device closes it', actions: [{ type: 'asked', request: req('a', 10), now: 0 }, { type: 'answered', id: 'a' }], want: [] },
    {
      name: 'an answered question does not reopen from a late event',
      actions: [{ type: 'answered', id: 'a' }, { type: 'asked', request: req('a', 10), now: 0 }],
      want: [],
    },
    { name: 'expiry closes it', actions: [{ type: 'asked', request: req('a', 10, 1000), now: 0 }, { type: 'tick', now: 999 }, { type: 'tick', now: 1000 }], want: [] },
    { name: 'an expired question is not opened', actions: [{ type: 'asked', request: req('a', 10, 500), now: 600 }], want: [] },
    {
      name: 'the list on connect is the truth',
      actions: [
        { type: 'asked', request: req('gone', 5), now: 0 },
        { type: 'list', requests: [req('y', 30), req('x', 20), { nope: 1 }, req('old', 1, 10)], now: 100 },
      ],
      want: ['x', 'y'],
    },
    { name: 'malformed requests are ignored', actions: [{ type: 'asked', request: { id: '' }, now: 0 }, { type: 'asked', request: null, now: 0 }], want: [] },
  ])('$name', ({ actions, want }) => {
    expect(ids(apply(initialPermissions(), ...actions))).toEqual(want);
  });

  it('answering: a failure keeps the question (retry), NOT_FOUND closes it', () => {
    let s = apply(initialPermissions(), { type: 'asked', request: req('a', 1), now: 0 }, { type: 'asked', request: req('b', 2), now: 0 });
    expect(current(s)?.id).toBe('a');
    s = reducePermissions(s, { type: 'answering', id: 'a' });
    expect(s.answering).toBe('a');
    s = reducePermissions(s, { type: 'answer-failed', id: 'a', error: 'connection lost', gone: false });
    expect(s.answering).toBeNull();
    expect(s.error).toBe('connection lost');
    expect(current(s)?.id).toBe('a');
    s = apply(s, { type: 'answering', id: 'a' }, { type: 'answer-failed', id: 'a', error: 'not found', gone: true });
    expect(current(s)?.id).toBe('b');
    expect(s.answering).toBeNull();
    expect(s.error).toBeNull();
    expect(reducePermissions(s, { type: 'answering', id: 'zz' })).toBe(s);
  });

  it('countdown and labels', () => {
    const r = apply(initialPermissions(), { type: 'asked', request: req('a', 0, 90_500), now: 0 }).open[0];
    expect(secondsLeft(r, 0)).toBe(91);
    expect(secondsLeft(r, 100_000)).toBe(0);
    expect(formatCountdown(91)).toBe('1:31');
    expect(formatCountdown(5)).toBe('0:05');
    expect(secondsLeft({ ...r, expires: 0 }, 0)).toBeNull();
    expect(levelLabel('L2')).toContain('run programs');
    expect(levelLabel('L3')).toBe('L3 network');
    setLang('zh');
    expect(levelLabel('L3')).toBe('L3 网络访问');
    resetLang();
    expect(levelLabel('L9')).toBe('L9');
  });
});

describe('what a yes holds', () => {
  it('a level for 10 minutes, a command or a node command for this call only, in en and zh', () => {
    resetLang();
    setLang('en');
    expect(answerHolds('level')).toBe('A yes holds 10 minutes for this session and level.');
    for (const kind of ['exec', 'node', 'something-new']) expect(answerHolds(kind)).toBe('A yes is for this call only: the next one asks again.');
    setLang('zh');
    expect(answerHolds('level')).toContain('10 分钟');
    expect(answerHolds('node')).toBe('允许仅对这一次调用有效，下次会再次询问。');
    resetLang();
  });
});

describe("a question's reason in the person's language (issue 24 item 8)", () => {
  const ask = (reasonCode: string, reasonParams: unknown, reason = 'the server said so') =>
    parseRequest(req('x', 0, 0, { reason, reasonCode, reasonParams }))!;
  it('says every code in en and zh, with its details, and falls back to the sentence', () => {
    resetLang();
    setLang('zh');
    expect(reasonText(ask('level', { role: 'writer', level: 'L3', ttlSeconds: '600' }))).toBe('writer 请求「L3 网络访问」权限，有效 10 分钟');
    expect(reasonText(ask('level', { role: '', level: 'L2', ttlSeconds: '600' }))).toBe('智能体 请求「L2 运行程序」权限，有效 10 分钟');
    expect(reasonText(ask('exec-run', { command: 'go test ./...', dir: '/src' }))).toBe('在 /src 中运行 go test ./...？');
    expect(reasonText(ask('node-run', { command: 'system.run', node: 'n1', argv: 'echo hi', cwd: '/tmp' }))).toBe('在 n1 上运行 system.run：echo hi（在 /tmp 中）？');
    expect(reasonText(ask('node-run-caps', { command: 'camera.snap', caps: 'camera', facing: 'front' }))).toBe('在具备 camera 能力的节点上运行 camera.snap（前置摄像头）？');
    expect(reasonText(ask('node-run', { command: 'camera.snap', node: 'n1', facing: 'wide' }))).toBe('在 n1 上运行 camera.snap（wide 摄像头）？');
    expect(reasonText(ask('canvas-eval', { target: 'main' }))).toContain('JavaScript（仅在其沙盒框架内）');
    // Unknown code, a missing or non-string param, params not an object, no code: the sentence as sent.
    expect(reasonText(ask('node-run-v9', { command: 'x', node: 'n' }))).toBe('the server said so');
    expect(reasonText(ask('node-run', { command: 'x' }))).toBe('the server said so');
    expect(reasonText(ask('node-run', { command: 'x', node: 7 }))).toBe('the server said so');
    expect(reasonText(ask('exec-run', ['a', 'b']))).toBe('the server said so');
    expect(reasonText(ask('', undefined))).toBe('the server said so');
    expect(reasonText(ask('toString', {}))).toBe('the server said so');
    setLang('en');
    expect(reasonText(ask('node-run', { command: 'camera.snap', node: 'phone (n1)', facing: 'back' }))).toBe('run camera.snap on phone (n1) (back camera)?');
    expect(reasonText(ask('level', { role: 'writer', level: 'L3', ttlSeconds: '600' }))).toBe('writer wants L3 network for 10 min');
    resetLang();
  });
});
