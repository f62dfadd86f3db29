import { describe, expect, it } from 'vitest';
import { enqueue, loadDraft, mustQueue, removeQueued, saveDraft, takeNext, type Queue } from './queue';

const m = (key: string, content = key) => ({ key, content, queuedAt: 1 });

describe('queue', () => {
  it.each([
    { busy: false, queued: 0, want: false },
    { busy: true, queued: 0, want: true },
    { busy: false, queued: 1, want: true },
  ])('mustQueue busy=$busy queued=$queued → $want', ({ busy, queued, want }) => {
    const q: Queue = queued ? [m('a')] : [];
    expect(mustQueue(q, busy)).toBe(want);
  });

  it('sends in order, one at a time, only when idle and connected', () => {
    let q: Queue = [];
    for (const k of ['one', 'two', 'three']) q = enqueue(q, m(k));
    q = enqueue(q, m('blank', '   '));
    q = enqueue(q, m('two')); // same key again
    expect(q.map((x) => x.key)).toEqual(['one', 'two', 'three']);

    expect(takeNext(q, true, true).next).toBeNull();
    expect(takeNext(q, false, false).next).toBeNull();
    const sent: string[] = [];
    for (;;) {
      const { next, rest } = takeNext(q, false, true);
      if (!next) break;
      sent.push(next.content);
      q = rest;
    }
    expect(sent).toEqual(['one', 'two', 'three']);
  });

  it('removes a queued message before it is sent', () => {
    const q: Queue = [m('a'), m('b'), m('c')];
    expect(removeQueued(q, 'b').map((x) => x.key)).toEqual(['a', 'c']);
    expect(removeQueued(q, 'zz')).toBe(q);
  });
});

describe('drafts', () => {
  it('are kept per profile; a blank draft is removed', () => {
    localStorage.clear();
    saveDraft(localStorage, 'main', '草稿 draft');
    saveDraft(localStorage, 'writer', 'other');
    expect(loadDraft(localStorage, 'main')).toBe('草稿 draft');
    expect(loadDraft(localStorage, 'writer')).toBe('other');
    saveDraft(localStorage, 'main', '  ');
    expect(loadDraft(localStorage, 'main')).toBe('');
    expect(localStorage.getItem('atrium.draft.main')).toBeNull();
    expect(loadDraft(null, 'main')).toBe('');
  });
});
