import { describe, expect, it } from 'vitest';
import { completeMention, hasMention, mentionAt, mentionCandidates, mentionableRoles, routeTarget } from './routing';
import { initialWorkbench, reduceWorkbench } from './workbench';

const wb = () =>
  reduceWorkbench(initialWorkbench(), {
    type: 'profiles',
    payload: {
      profiles: [{ id: 'main', name: 'Main' }],
      index: [
        { id: 'writer', name: 'writer', path: 'memory/roles/writer/config.md' },
        { id: '代码专家', name: '代码专家', path: 'memory/roles/代码专家/config.md' },
      ],
      instances: [{ instanceId: 'writer-2', profileId: 'writer', k: 2, state: 'ready', pid: 1, restarts: 0, startedAt: 1, ts: 1 }],
    },
  });

describe('@mentions in the chat box', () => {
  it('finds the mention being typed, not an e-mail address or a word', () => {
    expect(mentionAt('ask @wri', 8)).toEqual({ start: 4, query: 'wri' });
    expect(mentionAt('@', 1)).toEqual({ start: 0, query: '' });
    expect(mentionAt('请 ＠代码', 5)).toEqual({ start: 2, query: '代码' });
    expect(mentionAt('mail me at a@writer', 19)).toBeNull();
    expect(mentionAt('ask @writer now', 15)).toBeNull();
  });

  it('lists matching roles, prefix first, and completes with a space', () => {
    const roles = mentionableRoles(wb());
    expect(roles).toEqual(['main', 'writer', '代码专家']);
    expect(mentionCandidates(roles, 'W')).toEqual(['writer']);
    expect(mentionCandidates(roles, 'i')).toEqual(['main', 'writer']);
    expect(mentionCandidates(roles, '代码')).toEqual(['代码专家']);
    expect(completeMention('ask @wri please', 4, 8, 'writer')).toEqual({ text: 'ask @writer please', caret: 12 });
  });

  it('tells a mention from an address', () => {
    expect(hasMention('@writer draft this')).toBe(true);
    expect(hasMention('请＠代码专家 看看')).toBe(false); // no space before ＠: inside a word
    expect(hasMention('请 ＠代码专家 看看')).toBe(true);
    expect(hasMention('write to a@b.c')).toBe(false);
  });

  it('sends a role to its running instance, else starts <role>-1', () => {
    expect(routeTarget(wb(), 'main')).toBe('main');
    expect(routeTarget(wb(), 'writer')).toBe('writer-2');
    expect(routeTarget(wb(), '代码专家')).toBe('代码专家-1');
  });
});
