// Conflicts queue helpers (SPEC §5.3; docs/PROTOCOL.md conflicts.list / conflicts.resolve):
// shapes, the gateway calls, a small line diff for the side-by-side view, and "keep both".
import type { GatewayClient } from './gateway';

export interface Conflict {
  id: number;
  path: string;
  kind: 'overwrite' | 'pending' | (string & {});
  base: string;
  current: string;
  writer: string;
  session?: string;
  /** The text that is not in the file: the replaced text (overwrite) or the proposal (pending). */
  other: string;
  file?: string;
  ts: number;
  state: 'open' | 'resolved' | (string & {});
  resolution?: { choice: string; by: string; version: string; ts: number };
}

/** What conflicts.resolve accepts: keep the file, write the other side, or write given content. */
export type Choice = 'current' | 'other' | 'merged';

export async function listConflicts(gw: GatewayClient, state: 'open' | 'resolved' = 'open', limit = 100): Promise<Conflict[]> {
  const res = await gw.request<{ conflicts?: Conflict[] }>('conflicts.list', { state, limit });
  return Array.isArray(res.conflicts) ? res.conflicts : [];
}

/** conflicts.resolve; `as` resolves as that role (the ACL decides), absent: as the person (admin). */
export async function resolveConflict(gw: GatewayClient, id: number, choice: Choice, content?: string, as?: string): Promise<Conflict> {
  const params: Record<string, unknown> = { id, choice };
  if (as) params.as = as;
  if (choice === 'merged') {
    if (!content) throw new Error('keeping both needs the merged text');
    params.content = content;
  }
  const res = await gw.request<{ conflict: Conflict }>('conflicts.resolve', params);
  return res.conflict;
}

/** The file's text now (the "current" side). */
export async function currentText(gw: GatewayClient, path: string): Promise<string> {
  const res = await gw.request<{ text?: string }>('memory.get', { path });
  return typeof res.text === 'string' ? res.text : '';
}

export type DiffOp = { op: 'same' | 'del' | 'add'; text: string };

/** Splits into lines; a final newline does not make an empty last line. */
export function splitTextLines(t: string): string[] {
  if (t === '') return [];
  const lines = t.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Most cells of the LCS table before the diff gives up on alignment (every line then differs). */
const MAX_CELLS = 4_000_000;

/**
 * A line diff from a to b (longest common subsequence): 'del' lines are only in a, 'add' only in b.
 * Within a changed block the deletions come first.
 */
export function lineDiff(a: string[], b: string[]): DiffOp[] {
  // Common head and tail first: cheap and keeps the table small.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const am = a.slice(head, a.length - tail);
  const bm = b.slice(head, b.length - tail);
  const ops: DiffOp[] = a.slice(0, head).map((text) => ({ op: 'same', text }));
  const n = am.length;
  const m = bm.length;
  if (n * m > MAX_CELLS) {
    am.forEach((text) => ops.push({ op: 'del', text }));
    bm.forEach((text) => ops.push({ op: 'add', text }));
  } else {
    // L[i][j] = LCS length of am[i:] and bm[j:], flattened.
    const w = m + 1;
    const L = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--)
        L[i * w + j] = am[i] === bm[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
    let i = 0;
    let j = 0;
    const dels: DiffOp[] = [];
    const adds: DiffOp[] = [];
    const flush = () => {
      ops.push(...dels, ...adds);
      dels.length = 0;
      adds.length = 0;
    };
    while (i < n || j < m) {
      if (i < n && j < m && am[i] === bm[j]) {
        flush();
        ops.push({ op: 'same', text: am[i] });
        i++;
        j++;
      } else if (j >= m || (i < n && L[(i + 1) * w + j] >= L[i * w + j + 1])) {
        dels.push({ op: 'del', text: am[i++] });
      } else {
        adds.push({ op: 'add', text: bm[j++] });
      }
    }
    flush();
  }
  a.slice(a.length - tail).forEach((text) => ops.push({ op: 'same', text }));
  return ops;
}

export interface SideCell {
  /** 1-based line number on its side. */
  n: number;
  text: string;
  changed: boolean;
}
export interface SideRow {
  left: SideCell | null;
  right: SideCell | null;
}

/** Rows for a side-by-side view: equal lines side by side, a changed block's lines paired up. */
export function sideBySide(left: string, right: string): SideRow[] {
  const ops = lineDiff(splitTextLines(left), splitTextLines(right));
  const rows: SideRow[] = [];
  let ln = 0;
  let rn = 0;
  let k = 0;
  while (k < ops.length) {
    if (ops[k].op === 'same') {
      rows.push({ left: { n: ++ln, text: ops[k].text, changed: false }, right: { n: ++rn, text: ops[k].text, changed: false } });
      k++;
      continue;
    }
    const dels: string[] = [];
    const adds: string[] = [];
    while (k < ops.length && ops[k].op === 'del') dels.push(ops[k++].text);
    while (k < ops.length && ops[k].op === 'add') adds.push(ops[k++].text);
    for (let x = 0; x < Math.max(dels.length, adds.length); x++) {
      rows.push({
        left: x < dels.length ? { n: ++ln, text: dels[x], changed: true } : null,
        right: x < adds.length ? { n: ++rn, text: adds[x], changed: true } : null,
      });
    }
  }
  return rows;
}

/** How many lines differ on each side. */
export function diffStats(rows: SideRow[]): { left: number; right: number } {
  let left = 0;
  let right = 0;
  for (const r of rows) {
    if (r.left?.changed) left++;
    if (r.right?.changed) right++;
  }
  return { left, right };
}

/**
 * "Keep both": every line of the current text, and the other side's lines that the current text
 * lacks inserted where they stood (a union merge; in a changed block the current lines come first).
 */
export function keepBoth(current: string, other: string): string {
  const ops = lineDiff(splitTextLines(current), splitTextLines(other));
  const out = ops.map((o) => o.text).join('\n');
  return out === '' ? '' : out + '\n';
}
