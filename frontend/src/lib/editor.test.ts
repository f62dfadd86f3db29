import { describe, expect, it } from 'vitest';
import {
  choiceFor,
  collectDrop,
  createNote,
  hasMarkers,
  importDropped,
  mayWrite,
  merge3,
  newNotePath,
  NoteExistsError,
  parseTarget,
  problemsFirst,
  renameNote,
  renameTarget,
  resolveEdit,
  saveNote,
  summarize,
  targetValue,
  wasRenamed,
  type DropResult,
  type Gw,
} from './editor';
import { GatewayError } from './gateway';
import type { Conflict } from './conflicts';

/** A gateway that answers each method from a table and records the calls. */
function fakeGw(answer: (method: string, params: any) => any): Gw & { calls: { method: string; params: any }[] } {
  const calls: { method: string; params: any }[] = [];
  return {
    calls,
    request: async (method: string, params: any = {}) => {
      calls.push({ method, params });
      const r = answer(method, params);
      if (r instanceof Error) throw r;
      return r;
    },
    on: () => () => {},
  } as any;
}

describe('merge3', () => {
  const base = '# 计划\n第一步\n第二步\n第三步\n';
  it('takes a change made on one side only, from either side', () => {
    expect(merge3(base, '# 计划\n第一步（改）\n第二步\n第三步\n', base)).toEqual({ text: '# 计划\n第一步（改）\n第二步\n第三步\n', conflicts: 0 });
    expect(merge3(base, base, '# 计划\n第一步\n第二步\n第三步\n第四步\n')).toEqual({ text: '# 计划\n第一步\n第二步\n第三步\n第四步\n', conflicts: 0 });
  });
  it('keeps both sides when they changed different lines, even neighbours', () => {
    const mine = '# 计划\n第一步（我）\n第二步\n第三步\n';
    const theirs = '# 计划\n第一步\n第二步（他）\n第三步\n';
    expect(merge3(base, mine, theirs)).toEqual({ text: '# 计划\n第一步（我）\n第二步（他）\n第三步\n', conflicts: 0 });
  });
  it('takes an identical change once', () => {
    const same = '# 计划\n第一步\n第二步！\n第三步\n';
    expect(merge3(base, same, same)).toEqual({ text: same, conflicts: 0 });
  });
  it('puts a block both changed differently between markers with the given labels', () => {
    const m = merge3(base, '# 计划\n第一步\n我的第二步\n第三步\n', '# 计划\n第一步\n他的第二步\n第三步\n', { mine: '我的', theirs: '对方的' });
    expect(m.conflicts).toBe(1);
    expect(m.text).toBe('# 计划\n第一步\n<<<<<<< 我的\n我的第二步\n=======\n他的第二步\n>>>>>>> 对方的\n第三步\n');
    expect(hasMarkers(m.text)).toBe(true);
    expect(hasMarkers('a line with ======= inside\n')).toBe(false);
  });
  it('counts two insertions at one place as a conflict (their order is unknown)', () => {
    const m = merge3('a\nb\n', 'a\nmine\nb\n', 'a\ntheirs\nb\n');
    expect(m.conflicts).toBe(1);
    expect(m.text).toContain('<<<<<<< mine\nmine\n=======\ntheirs\n>>>>>>> theirs');
  });
  it('keeps an insertion next to a line the other side changed, in its place', () => {
    const base = '# 计划\n\n第一步\nStep two: ship.\n';
    expect(merge3(base, base + '\n中文输入法\n', '# 计划\n\n第一步\nStep two: ship on Friday.\n')).toEqual({
      text: '# 计划\n\n第一步\nStep two: ship on Friday.\n\n中文输入法\n',
      conflicts: 0,
    });
    expect(merge3('a\nb\n', 'a\nnew\nb\n', 'a\nB\n')).toEqual({ text: 'a\nnew\nB\n', conflicts: 0 });
  });
  it('merges from an empty base and into an empty file', () => {
    expect(merge3('', 'x\n', '').text).toBe('x\n');
    expect(merge3('a\n', '', 'a\n').text).toBe('');
  });
});

describe('who may write', () => {
  const access = (write: string[], sessionOwner?: string) => ({ rule: 'r', read: ['*'], write, collaborate: [], sessionOwner });
  it('follows the grant memory.files reports', () => {
    expect(mayWrite(undefined, 'writer')).toBe(true);
    expect(mayWrite(access(['admin', 'main']), null)).toBe(true);
    expect(mayWrite(access(['admin', 'main']), 'main')).toBe(true);
    expect(mayWrite(access(['admin', 'main']), 'writer')).toBe(false);
    expect(mayWrite(access(['main']), null)).toBe(false);
    expect(mayWrite(access(['*']), 'writer')).toBe(true);
    expect(mayWrite(access(['all']), null)).toBe(true);
    expect(mayWrite(access(['$session_owner'], 'writer'), 'writer')).toBe(true);
    expect(mayWrite(access(['$session_owner'], 'writer'), 'other')).toBe(false);
    expect(mayWrite(access([]), null)).toBe(false);
  });
});

describe('save, conflict, resolve', () => {
  const overwrite: Conflict = { id: 7, path: 'memory/global/plan.md', kind: 'overwrite', base: 'admin=1', current: 'admin=2', writer: 'admin', other: 'theirs\n', ts: 1, state: 'open' };

  it('saves with the version it opened and reports a clean save', async () => {
    const gw = fakeGw(() => ({ path: 'memory/global/plan.md', version: 'admin=2', merged: false, pending: false }));
    const out = await saveNote(gw, 'memory/global/plan.md', 'new\n', 'admin=1', 'old\n', 'writer');
    expect(out).toEqual({ kind: 'saved', version: 'admin=2' });
    expect(gw.calls[0]).toEqual({ method: 'memory.write', params: { path: 'memory/global/plan.md', content: 'new\n', mode: 'replace', baseVersion: 'admin=1', as: 'writer' } });
  });

  it('turns an overwrite conflict into mine (saved) and theirs (kept aside), resolved with the merge', async () => {
    const gw = fakeGw((m) => {
      if (m === 'memory.write') return { version: 'admin=3', merged: false, pending: false, conflict: overwrite };
      if (m === 'conflicts.resolve') return { conflict: { ...overwrite, state: 'resolved' } };
      if (m === 'memory.get') return { path: overwrite.path, text: 'merged\n', version: 'admin=4' };
    });
    const out = await saveNote(gw, overwrite.path, 'mine\n', 'admin=1', 'base\n', null);
    expect(out.kind).toBe('conflict');
    if (out.kind !== 'conflict') return;
    expect(out.edit).toMatchObject({ mine: 'mine\n', theirs: 'theirs\n', base: 'base\n' });
    const after = await resolveEdit(gw, out.edit, 'merged', 'merged\n', null);
    expect(gw.calls[1]).toEqual({ method: 'conflicts.resolve', params: { id: 7, choice: 'merged', content: 'merged\n' } });
    expect(after).toEqual({ path: overwrite.path, text: 'merged\n', version: 'admin=4' });
  });

  it('reads theirs from the file for a pending (decision) conflict, and maps each side to its choice', async () => {
    const pending = { ...overwrite, kind: 'pending', other: 'mine\n' };
    const gw = fakeGw((m) => {
      if (m === 'memory.write') return { version: 'admin=2', pending: true, conflict: pending };
      if (m === 'memory.get') return { path: pending.path, text: 'theirs now\n', version: 'admin=2' };
      if (m === 'conflicts.resolve') return { conflict: { ...pending, state: 'resolved' } };
    });
    const out = await saveNote(gw, pending.path, 'mine\n', 'admin=1', 'base\n', 'main');
    if (out.kind !== 'conflict') throw new Error('no conflict');
    expect(out.edit.theirs).toBe('theirs now\n');
    await resolveEdit(gw, out.edit, 'mine', '', 'main');
    expect(gw.calls.find((c) => c.method === 'conflicts.resolve')!.params).toEqual({ id: 7, choice: 'other', as: 'main' });
    expect(choiceFor('pending', 'theirs')).toBe('current');
    expect(choiceFor('overwrite', 'mine')).toBe('current');
    expect(choiceFor('overwrite', 'theirs')).toBe('other');
  });
});

describe('new notes', () => {
  it('makes a path from a folder and a name, refusing what is not one file name', () => {
    expect(newNotePath('memory/global', ' 会议记录 ')).toEqual({ path: 'memory/global/会议记录.md' });
    expect(newNotePath('memory/roles/main', 'Plan.MD')).toEqual({ path: 'memory/roles/main/Plan.md' });
    for (const bad of ['', '  ', 'a/b', 'a\\b', '.hidden', '..', 'a:b', 'x'.repeat(220)]) expect(newNotePath('memory/global', bad)).toHaveProperty('error');
  });
  it('never replaces a file that exists, and passes on the gateway refusal of a look-alike name', async () => {
    const taken = fakeGw(() => ({ path: 'memory/global/plan.md', text: 'x', version: 'admin=1' }));
    await expect(createNote(taken, 'memory/global/plan.md', null)).rejects.toBeInstanceOf(NoteExistsError);
    expect(taken.calls.map((c) => c.method)).toEqual(['memory.get']);

    const lookalike = fakeGw((m) =>
      m === 'memory.get' ? new GatewayError('NOT_FOUND', 'not found') : new GatewayError('CONFLICT', 'memory/global/plаn.md looks like the existing memory/global/plan.md'),
    );
    await expect(createNote(lookalike, 'memory/global/plаn.md', null)).rejects.toThrow(/looks like the existing/);

    let written = '';
    const fresh = fakeGw((m, p) => {
      if (m === 'memory.write') return ((written = p.content), { version: 'admin=1' });
      return written ? { path: p.path, text: written, version: 'admin=1' } : new GatewayError('NOT_FOUND', 'not found');
    });
    expect(await createNote(fresh, 'memory/global/会议.md', null)).toEqual({ path: 'memory/global/会议.md', text: '# 会议\n', version: 'admin=1' });
  });
});

describe('drop', () => {
  it('round-trips its targets', () => {
    for (const v of ['global', 'role:writer', 'session:s-1']) expect(targetValue(parseTarget(v))).toBe(v);
  });

  it('walks a dropped folder through entries, every batch of the reader, up to the bound', async () => {
    const file = (name: string, dir = '') => ({ isFile: true, isDirectory: false, name, fullPath: `/${dir}${name}`, file: (ok: (f: File) => void) => ok(new File(['x'], name)) });
    const children = Array.from({ length: 250 }, (_, i) => file(`n${i}.md`, 'notes/'));
    const batches = [children.slice(0, 100), children.slice(100, 200), children.slice(200), []];
    const dir = { isFile: false, isDirectory: true, name: 'notes', fullPath: '/notes', createReader: () => ({ readEntries: (ok: (e: any[]) => void) => ok(batches.shift()!) }) };
    const item = (e: any) => ({ kind: 'file', webkitGetAsEntry: () => e });
    const dt = { items: [item(dir), item(file('top.txt'))], files: [] } as any;
    const got = await collectDrop(dt, 240);
    expect(got.files.length).toBe(240);
    expect(got.files[0].path).toBe('notes/n0.md');
    expect(got.refused.length).toBe(11);
    expect(got.refused.at(-1)!.name).toBe('top.txt');
  });

  it('imports what is text, refuses the rest with a reason, and reports a taken name as renamed', async () => {
    const gw = fakeGw((_m, p) => ({ path: p.name === 'a.md' ? 'memory/roles/writer/a-1.md' : `memory/roles/writer/${p.name.replace(/\.txt$/, '.md')}`, bytes: 1, chunks: 1 }));
    const files = [
      { file: new File(['# a\n'], 'a.md'), path: 'a.md' },
      { file: new File(['b\n'], 'b.txt'), path: 'sub/b.txt' },
      { file: new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], 'pic.png'), path: 'pic.png' },
      { file: new File([new Uint8Array([0x61, 0x00, 0x62])], 'bin.md'), path: 'bin.md' },
    ];
    const seen: DropResult[] = [];
    const results = await importDropped(gw, files, { layer: 'role', role: 'writer' }, null, (r) => seen.push(r));
    expect(results.map((r) => r.name)).toEqual(['a.md', 'sub/b.txt', 'pic.png', 'bin.md']);
    expect([...seen].sort((x, y) => x.name.localeCompare(y.name))).toEqual([...results].sort((x, y) => x.name.localeCompare(y.name)));
    const by = Object.fromEntries(results.map((r) => [r.name, r]));
    expect(by['a.md']).toMatchObject({ status: 'renamed', path: 'memory/roles/writer/a-1.md' });
    expect(by['sub/b.txt']).toMatchObject({ status: 'ok', path: 'memory/roles/writer/b.md' });
    expect(by['pic.png'].status).toBe('refused');
    expect(by['pic.png'].reason).toMatch(/pic\.png/);
    expect(by['bin.md'].status).toBe('refused');
    expect(summarize(results)).toEqual({ ok: 1, renamed: 1, refused: 2, error: 0 });
    // Listed with what needs the person's eye first, in the drop's order within each kind.
    expect(problemsFirst(results).map((r) => r.name)).toEqual(['pic.png', 'bin.md', 'a.md', 'sub/b.txt']);
    expect(gw.calls.every((c) => c.params.layer === 'role' && c.params.role === 'writer')).toBe(true);
    expect(wasRenamed('notes.txt', 'memory/global/notes.md')).toBe(false);
  });

  it('sends a session target as layer session', async () => {
    const gw = fakeGw(() => ({ path: 'memory/sessions/s1/x.md', bytes: 1, chunks: 1 }));
    await importDropped(gw, [{ file: new File(['x'], 'x.md'), path: 'x.md' }], { layer: 'session', session: 's1' }, 'main', () => {});
    expect(gw.calls[0].params).toMatchObject({ name: 'x.md', layer: 'session', session: 's1', as: 'main' });
  });
});

describe('renaming a note', () => {
  it('keeps the folder for a bare name, moves for a memory/ path, refuses the same name and tricks', () => {
    expect(renameTarget('memory/global/ideas.md', 'plans')).toEqual({ path: 'memory/global/plans.md' });
    expect(renameTarget('memory/global/ideas.md', '计划.md')).toEqual({ path: 'memory/global/计划.md' });
    expect(renameTarget('memory/global/ideas.md', 'memory/roles/writer/ideas')).toEqual({ path: 'memory/roles/writer/ideas.md' });
    expect(renameTarget('MEMORY.md', 'NOTES')).toEqual({ path: 'NOTES.md' });
    expect('error' in renameTarget('memory/global/ideas.md', 'ideas.md')).toBe(true);
    expect('error' in renameTarget('memory/global/ideas.md', 'memory/../x.md')).toBe(true);
    expect('error' in renameTarget('memory/global/ideas.md', '../x')).toBe(true);
    expect('error' in renameTarget('memory/global/ideas.md', ' ')).toBe(true);
  });

  it('sends memory.rename with the version the editor opened, as the chosen role', async () => {
    const gw = fakeGw(() => ({ from: 'memory/global/a.md', path: 'memory/global/b.md', version: 'admin=3' }));
    expect(await renameNote(gw, 'memory/global/a.md', 'memory/global/b.md', 'admin=2', 'writer')).toEqual({ path: 'memory/global/b.md', version: 'admin=3' });
    expect(gw.calls).toEqual([{ method: 'memory.rename', params: { path: 'memory/global/a.md', to: 'memory/global/b.md', baseVersion: 'admin=2', as: 'writer' } }]);
  });
});
