// The memory editor's and the drop's one API module (SPEC §4, §5; docs/PROTOCOL.md "Memory writes",
// memory.import): every gateway call the editor and the drop make goes through here — memory.get,
// memory.write with baseVersion, conflicts.resolve, memory.import, roles.list, sessions.list — with
// the logic around them (who may write under the ACL, the 3-way merge offered on a conflict, a new
// note's name, the walk of a dropped folder and the import of many files).
import type { GatewayClient } from './gateway';
import { resolveConflict, lineDiff, splitTextLines, type Choice, type Conflict } from './conflicts';
import { readImportFile, type FileAccess, type ImportPayload } from './memory';
import { t } from './i18n.svelte';
import { errorText, errorTitle } from './util';

/** What this module needs of the gateway client (tests pass a fake). */
export type Gw = Pick<GatewayClient, 'request' | 'on'>;

/** The role the person acts as (`as`); null: the person at the desktop (admin). */
export type Actor = string | null;

function asParam(actor: Actor): Record<string, unknown> {
  return actor ? { as: actor } : {};
}

// ---- who may write (the ACL as memory.files reports it) ----

/**
 * Whether the actor may write a file, from the `access` memory.files gives (docs/PROTOCOL.md
 * "Access control"): admin matches `admin`, `*`/`all` and `authenticated`; a role matches its own
 * name, `*`/`all`, `authenticated`, and `$session_owner` when it owns the session. No `access` (an
 * app without the ACL): writable. The gateway decides in the end (a refused save says why).
 */
export function mayWrite(access: FileAccess | undefined, actor: Actor): boolean {
  if (!access) return true;
  return (access.write ?? []).some((p) => {
    if (p === '*' || p === 'all' || p === 'authenticated') return true;
    if (actor === null) return p === 'admin';
    if (p === '$session_owner') return access.sessionOwner === actor;
    return p === actor;
  });
}

// ---- open and save ----

export interface LoadedNote {
  path: string;
  text: string;
  /** The file's version (`writer=counter,...`); "" for a file never written through the write path. */
  version: string;
}

/** memory.get: the whole file and its version (read before the text). */
export async function loadNote(gw: Gw, path: string, actor: Actor): Promise<LoadedNote> {
  const res = await gw.request<{ path?: string; text?: string; version?: string }>('memory.get', { path, ...asParam(actor) });
  return { path: res.path || path, text: typeof res.text === 'string' ? res.text : '', version: typeof res.version === 'string' ? res.version : '' };
}

/** Calls cb when memory.changed names path (someone wrote, imported or resolved it); returns the unsubscribe. */
export function onNoteChanged(gw: Pick<GatewayClient, 'on'>, path: string, cb: () => void): () => void {
  return gw.on('memory.changed', (p: { paths?: unknown }) => {
    if (Array.isArray(p?.paths) && p.paths.includes(path)) cb();
  });
}

/** A save that found the file changed underneath: both texts and the record to resolve. */
export interface EditConflict {
  conflict: Conflict;
  /** The text the person saved. */
  mine: string;
  /** The text someone else wrote meanwhile. */
  theirs: string;
  /** The text the person started from (the merge's base). */
  base: string;
}

export type SaveOutcome = { kind: 'saved'; version: string } | { kind: 'conflict'; version: string; edit: EditConflict };

/**
 * memory.write {mode:"replace", baseVersion}: saves the editor's text. A stale baseVersion (the file
 * changed since it was opened) comes back with an open conflict: on an ordinary file the gateway
 * applied this save and kept the replaced text (`other`: theirs); on a decision file nothing was
 * written (`pending`: `other` is this save, theirs is the file now, read here).
 */
export async function saveNote(gw: Gw, path: string, content: string, baseVersion: string, base: string, actor: Actor): Promise<SaveOutcome> {
  const params: Record<string, unknown> = { path, content, mode: 'replace', ...asParam(actor) };
  if (baseVersion) params.baseVersion = baseVersion;
  const res = await gw.request<{ version?: string; pending?: boolean; conflict?: Conflict }>('memory.write', params);
  const version = typeof res.version === 'string' ? res.version : '';
  const c = res.conflict;
  if (!c || c.state === 'resolved') return { kind: 'saved', version };
  const theirs = c.kind === 'pending' ? (await loadNote(gw, path, actor)).text : c.other;
  return { kind: 'conflict', version, edit: { conflict: c, mine: content, theirs, base } };
}

/** Which conflicts.resolve choice keeps a side: overwrite — the file holds mine; pending — the proposal is mine. */
export function choiceFor(kind: Conflict['kind'], side: 'mine' | 'theirs'): Choice {
  const mineInFile = kind !== 'pending';
  return (side === 'mine') === mineInFile ? 'current' : 'other';
}

/** Resolves an editor's conflict with one side or the person's merged text; the note's text and version after. */
export async function resolveEdit(gw: Gw, edit: EditConflict, how: 'mine' | 'theirs' | 'merged', merged: string, actor: Actor): Promise<LoadedNote> {
  if (how === 'merged') {
    await resolveConflict(gw as GatewayClient, edit.conflict.id, 'merged', merged, actor ?? undefined);
  } else {
    await resolveConflict(gw as GatewayClient, edit.conflict.id, choiceFor(edit.conflict.kind, how), undefined, actor ?? undefined);
  }
  return loadNote(gw, edit.conflict.path, actor);
}

// ---- 3-way merge ----

interface Hunk {
  /** Base lines [start, end) replaced by lines. */
  start: number;
  end: number;
  lines: string[];
  side: 0 | 1;
}

function hunks(base: string[], other: string[], side: 0 | 1): Hunk[] {
  const out: Hunk[] = [];
  let bi = 0;
  let cur: Hunk | null = null;
  for (const op of lineDiff(base, other)) {
    if (op.op === 'same') {
      if (cur) out.push(cur);
      cur = null;
      bi++;
      continue;
    }
    cur ??= { start: bi, end: bi, lines: [], side };
    if (op.op === 'del') {
      bi++;
      cur.end = bi;
    } else cur.lines.push(op.text);
  }
  if (cur) out.push(cur);
  return out;
}

/** The base lines [s, e) with one side's hunks (all inside the range) applied. */
function applyRange(base: string[], s: number, e: number, hs: Hunk[]): string[] {
  const out: string[] = [];
  let i = s;
  for (const h of hs) {
    out.push(...base.slice(i, h.start), ...h.lines);
    i = h.end;
  }
  out.push(...base.slice(i, e));
  return out;
}

export interface MergeLabels {
  mine: string;
  theirs: string;
}

export interface Merged {
  text: string;
  /** How many blocks both sides changed differently (each between conflict markers). */
  conflicts: number;
}

/**
 * A line-based 3-way merge of mine and theirs from base: a block only one side changed takes that
 * side, a block both changed alike is taken once, a block both changed differently is written
 * between `<<<<<<< mine`, `=======` and `>>>>>>> theirs` markers for the person to edit. Changes
 * that only touch (neighbouring lines, an insertion just before or after a changed line) are both
 * kept; two different insertions at one place are a conflict (their order is not known).
 */
export function merge3(base: string, mine: string, theirs: string, labels: MergeLabels = { mine: 'mine', theirs: 'theirs' }): Merged {
  const b = splitTextLines(base);
  const all = [...hunks(b, splitTextLines(mine), 0), ...hunks(b, splitTextLines(theirs), 1)].sort((x, y) => x.start - y.start || x.end - y.end);
  const out: string[] = [];
  let pos = 0;
  let conflicts = 0;
  let k = 0;
  while (k < all.length) {
    const s = all[k].start;
    let e = all[k].end;
    const group: Hunk[] = [all[k++]];
    while (k < all.length && (all[k].start < e || (all[k].start === e && all[k].start === all[k].end && s === e))) {
      e = Math.max(e, all[k].end);
      group.push(all[k++]);
    }
    out.push(...b.slice(pos, s));
    pos = e;
    const a = group.filter((h) => h.side === 0);
    const c = group.filter((h) => h.side === 1);
    if (c.length === 0) out.push(...applyRange(b, s, e, a));
    else if (a.length === 0) out.push(...applyRange(b, s, e, c));
    else {
      const ma = applyRange(b, s, e, a);
      const mc = applyRange(b, s, e, c);
      if (ma.join('\n') === mc.join('\n')) out.push(...ma);
      else {
        conflicts++;
        out.push(`<<<<<<< ${labels.mine}`, ...ma, '=======', ...mc, `>>>>>>> ${labels.theirs}`);
      }
    }
  }
  out.push(...b.slice(pos));
  const text = out.join('\n');
  const endsNl = (mine.endsWith('\n') || theirs.endsWith('\n') || mine === '') && text !== '';
  return { text: endsNl ? text + '\n' : text, conflicts };
}

/** Whether a merge still holds conflict markers (a line starting `<<<<<<< `, `=======` or `>>>>>>> `). */
export function hasMarkers(text: string): boolean {
  return /^(<<<<<<< |=======$|>>>>>>> )/m.test(text);
}

// ---- create ----

/** Where a new note may go: its folder under memory/ and the layer that folder is. */
export interface Folder {
  dir: string;
  label: string;
}

/** The folders a note can be created in: global, each role's, each live session's. */
export function folders(roles: string[], sessions: string[]): Folder[] {
  return [
    { dir: 'memory/global', label: t('editor.folder.global') },
    ...roles.map((r) => ({ dir: `memory/roles/${r}`, label: t('editor.folder.role', { role: r }) })),
    ...sessions.map((s) => ({ dir: `memory/sessions/${s}`, label: t('editor.folder.session', { session: s }) })),
  ];
}

/**
 * A new note's path from its folder and the name typed: ".md" added when the name has no Markdown
 * extension; an error (in words) for a name that cannot be a file name here. Look-alike names are the
 * gateway's to refuse (its CONFLICT message is shown as it is).
 */
export function newNotePath(dir: string, name: string): { path: string } | { error: string } {
  let n = name.trim().normalize('NFC');
  if (n === '') return { error: t('editor.name.empty') };
  if (/[/\\]/.test(n) || n.startsWith('.') || n.includes('..')) return { error: t('editor.name.plain') };
  if (/[\u0000-\u001f\u007f:*?"<>|]/.test(n)) return { error: t('editor.name.chars') };
  if (!/\.md$/i.test(n)) n += '.md';
  else n = n.slice(0, -3) + '.md';
  if (new TextEncoder().encode(n).length > 200) return { error: t('editor.name.long') };
  return { path: `${dir}/${n}` };
}

/** Sentinel: the name is taken (a new note never replaces a file). */
export class NoteExistsError extends Error {
  constructor(readonly path: string) {
    super(t('editor.exists', { path }));
  }
}

/**
 * Creates a note: refused when the path is taken (memory.get finds it: NoteExistsError), else
 * memory.write replace with a title line. The gateway refuses a look-alike name (CONFLICT) and what
 * the ACL does not let the actor write (FORBIDDEN).
 */
export async function createNote(gw: Gw, path: string, actor: Actor): Promise<LoadedNote> {
  try {
    await loadNote(gw, path, actor);
    throw new NoteExistsError(path);
  } catch (e) {
    if (e instanceof NoteExistsError) throw e;
    if ((e as { code?: string })?.code !== 'NOT_FOUND') throw e;
  }
  const stem = path.slice(path.lastIndexOf('/') + 1).replace(/\.md$/i, '');
  await gw.request('memory.write', { path, content: `# ${stem}\n`, mode: 'replace', ...asParam(actor) });
  return loadNote(gw, path, actor);
}

// ---- renaming a note (memory.rename) ----

/**
 * The new path of a note being renamed from what the person typed: a bare name stays in the note's
 * folder, a path starting with "memory/" is taken as it is (".md" added when missing); an error (in
 * words) for a name that cannot be a file name, or for the same path.
 */
export function renameTarget(from: string, typed: string): { path: string } | { error: string } {
  const v = typed.trim().normalize('NFC');
  const slash = v.lastIndexOf('/');
  let out: { path: string } | { error: string };
  if (v.startsWith('memory/') && slash > 0) {
    const dir = v.slice(0, slash);
    if (dir.split('/').some((seg) => seg === '' || seg === '.' || seg === '..' || seg.startsWith('.'))) return { error: t('editor.name.plain') };
    out = newNotePath(dir, v.slice(slash + 1));
  } else {
    out = newNotePath(from.includes('/') ? from.slice(0, from.lastIndexOf('/')) : '.', v);
    if ('path' in out && out.path.startsWith('./')) out = { path: out.path.slice(2) };
  }
  if ('path' in out && out.path === from) return { error: t('editor.renameSame') };
  return out;
}

/**
 * memory.rename {path, to, baseVersion}: moves the note; the gateway refuses a changed file
 * (CONFLICT), a taken or look-alike name (CONFLICT) and what the ACL does not let the actor write on
 * either path (FORBIDDEN). Returns the new path and version.
 */
export async function renameNote(gw: Gw, from: string, to: string, baseVersion: string, actor: Actor): Promise<{ path: string; version: string }> {
  const params: Record<string, unknown> = { path: from, to, ...asParam(actor) };
  if (baseVersion) params.baseVersion = baseVersion;
  const res = await gw.request<{ path?: string; version?: string }>('memory.rename', params);
  return { path: res.path || to, version: res.version ?? '' };
}

// ---- roles and sessions (the places to create in and drop into) ----

export async function listRoles(gw: Gw): Promise<string[]> {
  const res = await gw.request<{ roles?: { role: string }[] }>('roles.list', {});
  const roles = (res.roles ?? []).map((r) => r.role).filter((r) => typeof r === 'string' && r !== '');
  return [...new Set(roles)].sort((a, b) => (a === 'main' ? -1 : b === 'main' ? 1 : a.localeCompare(b)));
}

export async function listSessions(gw: Gw): Promise<string[]> {
  const res = await gw.request<{ sessions?: { id: string; archived?: boolean; expired?: boolean }[] }>('sessions.list', {});
  return (res.sessions ?? []).filter((s) => !s.archived && !s.expired && s.id).map((s) => s.id);
}

// ---- drop ----

/** Where a drop goes: global memory (L1), a role's folder (L2) or a live session's (L3). */
export type DropTarget = { layer: 'global' } | { layer: 'role'; role: string } | { layer: 'session'; session: string };

/** The target as a select value ("global", "role:<name>", "session:<id>") and back. */
export function targetValue(t: DropTarget): string {
  return t.layer === 'global' ? 'global' : t.layer === 'role' ? `role:${t.role}` : `session:${t.session}`;
}
export function parseTarget(v: string): DropTarget {
  if (v.startsWith('role:')) return { layer: 'role', role: v.slice(5) };
  if (v.startsWith('session:')) return { layer: 'session', session: v.slice(8) };
  return { layer: 'global' };
}

/** The most files one drop walks (a bigger folder: the rest refused with a reason). */
export const MAX_DROP_FILES = 2000;

export interface DroppedFile {
  file: File;
  /** The path inside the dropped folder ("notes/a.md"), or the file's name. */
  path: string;
}

export interface Refused {
  name: string;
  reason: string;
}

/** The parts of the File and Directory Entries API a drop uses (Chromium's webkitGetAsEntry). */
interface EntryLike {
  isFile: boolean;
  isDirectory: boolean;
  name: string;
  fullPath?: string;
  file?(ok: (f: File) => void, fail: (e: unknown) => void): void;
  createReader?(): { readEntries(ok: (es: EntryLike[]) => void, fail: (e: unknown) => void): void };
}

/**
 * The files of a drop: each dropped file, and every file inside a dropped folder (walked through
 * webkitGetAsEntry, depth first, at most `max` files; a folder's reader is read until it answers
 * empty). Without entries (a synthetic DataTransfer, an old browser) the DataTransfer's files.
 */
export async function collectDrop(dt: Pick<DataTransfer, 'items' | 'files'>, max = MAX_DROP_FILES): Promise<{ files: DroppedFile[]; refused: Refused[] }> {
  const files: DroppedFile[] = [];
  const refused: Refused[] = [];
  const entries: EntryLike[] = [];
  for (const it of Array.from(dt.items ?? [])) {
    if (it.kind !== 'file') continue;
    const e = (it as DataTransferItem & { webkitGetAsEntry?: () => EntryLike | null }).webkitGetAsEntry?.();
    if (e) entries.push(e);
  }
  if (entries.length === 0) {
    for (const f of Array.from(dt.files ?? [])) push({ file: f, path: f.name });
    return { files, refused };
  }
  function push(f: DroppedFile) {
    if (files.length < max) files.push(f);
    else refused.push({ name: f.path, reason: t('drop.tooMany', { n: max }) });
  }
  const walk = async (e: EntryLike): Promise<void> => {
    const path = (e.fullPath ?? e.name).replace(/^\//, '');
    if (e.isFile && e.file) {
      try {
        push({ file: await new Promise<File>((ok, fail) => e.file!(ok, fail)), path });
      } catch (err) {
        refused.push({ name: path, reason: t('import.unreadable', { name: path, error: err instanceof Error ? err.message : String(err) }) });
      }
      return;
    }
    if (e.isDirectory && e.createReader) {
      const reader = e.createReader();
      // readEntries answers in batches (100 in Chromium) until an empty one.
      for (;;) {
        let batch: EntryLike[];
        try {
          batch = await new Promise<EntryLike[]>((ok, fail) => reader.readEntries(ok, fail));
        } catch (err) {
          refused.push({ name: path, reason: t('import.unreadable', { name: path, error: err instanceof Error ? err.message : String(err) }) });
          return;
        }
        if (batch.length === 0) return;
        for (const child of batch) await walk(child);
      }
    }
  };
  for (const e of entries) await walk(e);
  return { files, refused };
}

export interface DropResult {
  name: string;
  status: 'ok' | 'renamed' | 'refused' | 'error';
  /** ok/renamed: where the note landed. */
  path?: string;
  /** refused/error: why, in words. */
  reason?: string;
  /** error: the gateway's code and whole message (a tooltip). */
  title?: string;
}

export interface DropSummary {
  ok: number;
  renamed: number;
  refused: number;
  error: number;
}

export function summarize(results: DropResult[]): DropSummary {
  const s: DropSummary = { ok: 0, renamed: 0, refused: 0, error: 0 };
  for (const r of results) s[r.status]++;
  return s;
}

/**
 * The results to list, what needs the person's eye first: failed, then refused (with their
 * reasons), then stored under a new name, then stored; the drop's order within each. A drop of
 * 300 notes and one picture listed the picture's refusal under 300 rows of "OK".
 */
export function problemsFirst(results: DropResult[]): DropResult[] {
  const rank: Record<DropResult['status'], number> = { error: 0, refused: 1, renamed: 2, ok: 3 };
  return results.map((r, i) => ({ r, i })).sort((a, b) => rank[a.r.status] - rank[b.r.status] || a.i - b.i).map((x) => x.r);
}

/** Whether the gateway stored a note under another name than the one dropped (its name was taken). */
export function wasRenamed(name: string, path: string): boolean {
  const stem = (s: string) => s.replace(/\.(md|markdown|txt)$/i, '');
  const base = name.slice(name.lastIndexOf('/') + 1);
  return stem(path.slice(path.lastIndexOf('/') + 1)) !== stem(base.trim());
}

/** How many memory.import calls a drop keeps in flight. */
export const DROP_CONCURRENCY = 3;

/**
 * Imports the dropped files into target with memory.import, DROP_CONCURRENCY at a time; each file
 * is checked first (a name that is not .md/.markdown/.txt, over 4 MiB, not UTF-8, binary: refused
 * with the reason, nothing sent). Never overwrites: a taken or look-alike name is stored by the
 * gateway under the next free name (`-1`, `-2`, …) and reported as renamed. A folder's files are
 * imported side by side into the target folder (its subfolders are not kept). onResult is called
 * once per file, in completion order, with the file's index; the results come back in the files'
 * order. Errors of single files are results; nothing throws.
 */
export async function importDropped(
  gw: Gw,
  files: DroppedFile[],
  target: DropTarget,
  actor: Actor,
  onResult: (r: DropResult, index: number) => void,
): Promise<DropResult[]> {
  const results: DropResult[] = new Array(files.length);
  let next = 0;
  const params = target.layer === 'global' ? { layer: 'global' } : target.layer === 'role' ? { layer: 'role', role: target.role } : { layer: 'session', session: target.session };
  const one = async (d: DroppedFile): Promise<DropResult> => {
    const checked = await readImportFile(d.file);
    if (!checked.ok) return { name: d.path, status: 'refused', reason: checked.error };
    try {
      const res = await gw.request<ImportPayload>('memory.import', { name: d.file.name, content: checked.content, ...params, ...asParam(actor) }, { timeoutMs: 120_000 });
      return { name: d.path, status: wasRenamed(d.file.name, res.path) ? 'renamed' : 'ok', path: res.path };
    } catch (e) {
      // The row names the file: the message's own "import <name>: " and "memory: …:" prefixes go.
      const msg = errorText(e);
      const prefix = `import ${d.file.name}: `;
      return { name: d.path, status: 'error', reason: errorText(msg.startsWith(prefix) ? msg.slice(prefix.length) : msg), title: errorTitle(e) };
    }
  };
  const worker = async () => {
    while (next < files.length) {
      const i = next++;
      const r = await one(files[i]);
      results[i] = r;
      onResult(r, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(DROP_CONCURRENCY, files.length) }, worker));
  return results;
}
