import { describe, expect, it } from 'vitest';
import {
  activity,
  chatTarget,
  initialWorkbench,
  instanceLabel,
  instanceTrouble,
  instancesOf,
  mergeProfiles,
  reconcileSelection,
  reduceWorkbench,
  totalUnread,
  type WorkbenchAction,
  type WorkbenchState,
} from './workbench';
import { resetLang, setLang } from './i18n.svelte';

const run = (runId: string, profileId = 'main') => ({ runId, profileId, sessionId: 's', messageId: `a-${runId}` });
const ev = (event: string, payload: unknown): WorkbenchAction => ({ type: 'event', event, payload });
const apply = (s: WorkbenchState, ...actions: WorkbenchAction[]) => actions.reduce(reduceWorkbench, s);
const inst = (instanceId: string, state: string, ts: number, extra: Record<string, unknown> = {}) => ({
  instanceId,
  profileId: instanceId.replace(/-\d+$/, ''),
  state,
  restarts: 0,
  ts,
  ...extra,
});

describe('mergeProfiles', () => {
  it('lists the chat profiles first, then the index entries not already listed', () => {
    const got = mergeProfiles({
      profiles: [{ id: 'main', name: 'Main', model: 'm', provider: 'offline' }],
      index: [
        { id: 'code-expert', name: 'code-expert', path: 'memory/roles/code-expert/config.md' },
        { id: 'main', name: 'main', path: 'memory/roles/main/config.md' },
        { id: '' },
      ],
    });
    expect(got).toEqual([
      { id: 'main', name: 'Main', description: undefined, model: 'm', provider: 'offline', chat: true, path: 'memory/roles/main/config.md' },
      { id: 'code-expert', name: 'code-expert', path: 'memory/roles/code-expert/config.md', chat: false },
    ]);
  });
  it('survives a malformed payload', () => {
    expect(mergeProfiles({ profiles: 'x' as never, index: [null as never] })).toEqual([]);
  });
});

describe('instance status reduce', () => {
  const cases: Array<{ name: string; actions: WorkbenchAction[]; want: Array<[string, string, number]> }> = [
    {
      name: 'events follow the life of an instance',
      actions: [
        ev('profiles.instance', inst('writer-1', 'starting', 1)),
        ev('profiles.instance', inst('writer-1', 'ready', 2)),
        ev('profiles.instance', inst('writer-1', 'crashed', 3, { reason: 'exited: signal: killed' })),
        ev('profiles.instance', inst('writer-1', 'restarting', 4, { reason: 'restart in 500ms', restarts: 1 })),
      ],
      want: [['writer-1', 'restarting', 1]],
    },
    {
      name: 'an older status arriving late is ignored',
      actions: [ev('profiles.instance', inst('writer-1', 'ready', 5)), ev('profiles.instance', inst('writer-1', 'starting', 4))],
      want: [['writer-1', 'ready', 0]],
    },
    {
      name: 'instances sort by profile, then by k (10 after 2)',
      actions: [
        ev('profiles.instance', inst('writer-10', 'ready', 1)),
        ev('profiles.instance', inst('writer-2', 'ready', 1)),
        ev('profiles.instance', inst('coder-1', 'busy', 1)),
      ],
      want: [['coder-1', 'busy', 0], ['writer-2', 'ready', 0], ['writer-10', 'ready', 0]],
    },
    {
      name: 'the list snapshot replaces what is held, except newer events',
      actions: [
        ev('profiles.instance', inst('writer-1', 'busy', 9)),
        ev('profiles.instance', inst('gone-1', 'stopped', 2)),
        { type: 'profiles', payload: { instances: [inst('writer-1', 'ready', 5), inst('writer-2', 'starting', 5), { bogus: true }] } },
      ],
      want: [['writer-1', 'busy', 0], ['writer-2', 'starting', 0]],
    },
    {
      name: 'malformed events are ignored',
      actions: [ev('profiles.instance', { state: 'ready' }), ev('profiles.instance', null)],
      want: [],
    },
  ];
  it.each(cases)('$name', ({ actions, want }) => {
    const s = apply(initialWorkbench(), ...actions);
    expect(s.instances.map((i) => [i.instanceId, i.state, i.restarts])).toEqual(want);
  });

  it('chatTarget: a profile, else an instance of one, else nothing', () => {
    const s = apply(
      initialWorkbench(),
      { type: 'profiles', payload: { profiles: [{ id: 'main' }], index: [{ id: 'writer', path: 'p' }], instances: [inst('writer-1', 'ready', 1)] } },
    );
    expect(chatTarget(s, 'main')).toMatchObject({ id: 'main', chat: true });
    expect(chatTarget(s, 'writer')).toMatchObject({ id: 'writer', chat: false });
    expect(chatTarget(s, 'writer-1')).toEqual({ id: 'writer-1', name: 'writer-1', chat: true, instanceOf: 'writer', running: true });
    // An instance of a listed role that is not running (the app restarted): a send starts it.
    expect(chatTarget(s, 'writer-2')).toEqual({ id: 'writer-2', name: 'writer-2', chat: true, instanceOf: 'writer', running: false });
    expect(chatTarget(s, 'writer-0')).toBeNull();
    expect(chatTarget(s, 'main-1')).toBeNull(); // main is not a role of the index
    expect(chatTarget(s, 'nobody')).toBeNull();
    expect(chatTarget(s, 'nobody-1')).toBeNull();
  });

  it('reconcileSelection: after a (re)connect the selection follows profiles.list', () => {
    const list: WorkbenchAction = { type: 'profiles', payload: { profiles: [{ id: 'main' }], index: [{ id: 'code-expert', path: 'p' }], instances: [] } };
    const sel = (id: string) => apply(initialWorkbench(id), list);
    // Not loaded yet: nothing to decide.
    expect(reconcileSelection(initialWorkbench('code-expert-1'))).toBeNull();
    // The instance vanished with a restart: it stays selected (a send starts it again).
    expect(reconcileSelection(sel('code-expert-1'))).toBeNull();
    expect(reconcileSelection(sel('main'))).toBeNull();
    expect(reconcileSelection(sel('code-expert'))).toBeNull();
    // A role deleted since, or an id that was never valid: back to main.
    expect(reconcileSelection(sel('writer-1'))).toBe('main');
    expect(reconcileSelection(sel('writer'))).toBe('main');
    // Without main: the first profile.
    const noMain = apply(initialWorkbench('gone'), { type: 'profiles', payload: { index: [{ id: 'b', path: 'p' }, { id: 'c', path: 'q' }] } });
    expect(reconcileSelection(noMain)).toBe('b');
  });

  it('labels and trouble states', () => {
    expect(instanceTrouble(inst('a-1', 'hung', 1) as never)).toBe(true);
    expect(instanceTrouble(inst('a-1', 'ready', 1) as never)).toBe(false);
    expect(instanceLabel(inst('a-1', 'crashed', 1) as never)).toBe('Crashed');
    setLang('zh');
    expect(instanceLabel(inst('a-1', 'crashed', 1) as never)).toBe('崩溃');
    resetLang();
    expect(instanceLabel(inst('a-1', 'weird', 1) as never)).toBe('weird');
    const s = apply(initialWorkbench(), ev('profiles.instance', inst('a-1', 'ready', 1)), ev('profiles.instance', inst('b-1', 'ready', 1)));
    expect(instancesOf(s, 'b').map((i) => i.instanceId)).toEqual(['b-1']);
  });
});

describe('activity', () => {
  it.each([
    { name: 'idle with nothing', actions: [], want: 'idle' },
    { name: 'streaming while a run goes', actions: [ev('chat.thinking', run('r1'))], want: 'streaming' },
    { name: 'a late chunk after the end does not revive the run', actions: [ev('chat.chunk', run('r1')), ev('chat.final', run('r1')), ev('chat.chunk', run('r1'))], want: 'idle' },
    { name: 'waiting for permission', actions: [ev('chat.thinking', run('r1')), ev('agent.permission', { id: 'p1', ...run('r1') })], want: 'waiting' },
    {
      name: 'back to streaming once answered',
      actions: [ev('agent.permission', { id: 'p1', ...run('r1') }), ev('agent.permission.answered', { id: 'p1', allowed: true, by: 'person' })],
      want: 'streaming',
    },
    {
      name: 'waiting from the agent.permissions list on connect',
      actions: [{ type: 'permissions', requests: [{ id: 'p9', ...run('r9') }, { id: '' }] } as WorkbenchAction],
      want: 'waiting',
    },
    { name: 'error after a failed run', actions: [ev('chat.thinking', run('r1')), ev('chat.error', { ...run('r1'), error: { code: 'UNAVAILABLE', message: 'model down' } })], want: 'error' },
    {
      name: 'the next run clears the error',
      actions: [ev('chat.error', { ...run('r1'), error: { message: 'x' } }), ev('agent.state', { ...run('r2'), from: 'idle', to: 'analyzing', at: 1 })],
      want: 'streaming',
    },
    { name: 'cancelled is idle', actions: [ev('chat.thinking', run('r1')), ev('chat.cancelled', { ...run('r1'), reason: 'cancelled' })], want: 'idle' },
    { name: 'another profile is not this one', actions: [ev('chat.thinking', run('r1', 'writer'))], want: 'idle' },
  ])('$name', ({ actions, want }) => {
    expect(activity(apply(initialWorkbench(), ...(actions as WorkbenchAction[])), 'main')).toBe(want);
  });

  it('a reconnect forgets the runs in progress (their end may have been missed); the next event brings one back', () => {
    let s = apply(initialWorkbench(), ev('chat.thinking', run('r1')), ev('agent.permission', { id: 'p1', ...run('r2') }));
    expect(activity(s, 'main')).toBe('waiting');
    s = reduceWorkbench(s, { type: 'connected' });
    expect(activity(s, 'main')).toBe('idle');
    expect(reduceWorkbench(s, { type: 'connected' })).toBe(s);
    s = reduceWorkbench(s, ev('chat.chunk', run('r1')));
    expect(activity(s, 'main')).toBe('streaming');
  });

  it('keeps the error text', () => {
    const s = apply(initialWorkbench(), ev('chat.error', { ...run('r1'), error: { code: 'X', message: 'chat: the model refused' } }));
    expect(s.errors.main).toBe('the model refused');
  });
});

describe('unread counting', () => {
  it('counts answers of profiles not in view, once per run, and clears on view', () => {
    let s = initialWorkbench('main');
    s = apply(
      s,
      ev('chat.final', run('w1', 'writer')),
      ev('chat.final', run('w1', 'writer')), // a repeat
      ev('chat.final', run('w2', 'writer')),
      ev('chat.final', run('m1', 'main')), // in view
      ev('chat.cancelled', run('w3', 'writer')), // no answer
      ev('chat.error', { ...run('w4', 'writer'), error: { message: 'x' } }), // shown as the error state
    );
    expect(s.unread).toEqual({ writer: 2 });
    expect(totalUnread(s)).toBe(2);
    s = reduceWorkbench(s, { type: 'select', profileId: 'writer' });
    expect(s.selected).toBe('writer');
    expect(s.unread).toEqual({});
    s = apply(s, ev('chat.final', run('m2', 'main')), ev('chat.final', run('w5', 'writer')));
    expect(s.unread).toEqual({ main: 1 });
    const same = reduceWorkbench(s, { type: 'select', profileId: 'writer' });
    expect(same).toBe(s);
  });
});
