import { describe, expect, it } from 'vitest';
import { awaitingPerson, isOpen, remaining, statusAt, upsert, type Collaboration } from './collab';

const base: Collaboration = {
  collabId: 'c-1',
  from: 'main',
  to: 'writer',
  task: 'Write a line',
  context: ['memory/global/brief.md'],
  status: 'pending',
  createdAt: '2026-12-03T09:00:00Z',
  expiresAt: '2026-12-03T10:00:00Z',
};

describe('collaborations', () => {
  it('reports an open one past its expiry as expired', () => {
    expect(statusAt(base, Date.parse('2026-12-03T09:59:59Z'))).toBe('pending');
    expect(statusAt(base, Date.parse('2026-12-03T10:00:00Z'))).toBe('expired');
    expect(isOpen({ ...base, status: 'completed' }, 0)).toBe(false);
  });
  it('asks the person about pending ones that need them, oldest first', () => {
    const now = Date.parse('2026-12-03T09:30:00Z');
    const a = { ...base, collabId: 'c-a', needsPerson: true, createdAt: '2026-12-03T09:10:00Z' };
    const b = { ...base, collabId: 'c-b', needsPerson: true, createdAt: '2026-12-03T09:05:00Z' };
    const c = { ...base, collabId: 'c-c', needsPerson: false };
    const d = { ...base, collabId: 'c-d', needsPerson: true, status: 'accepted' as const };
    expect(awaitingPerson([a, b, c, d], now).map((x) => x.collabId)).toEqual(['c-b', 'c-a']);
  });
  it('merges changes by id, newest first, and ignores what is not a collaboration', () => {
    let list = upsert([], base);
    list = upsert(list, { ...base, collabId: 'c-2', createdAt: '2026-12-03T09:01:00Z' });
    list = upsert(list, { ...base, status: 'accepted' });
    expect(list.map((c) => `${c.collabId}:${c.status}`)).toEqual(['c-2:pending', 'c-1:accepted']);
    expect(upsert(list, { collabId: 3 })).toBe(list);
  });
  it('splits the time left', () => {
    expect(remaining(3_723_400)).toEqual({ h: 1, m: 2, s: 3 });
    expect(remaining(-5)).toEqual({ h: 0, m: 0, s: 0 });
  });
});
