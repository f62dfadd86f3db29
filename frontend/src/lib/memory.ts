// Memory panel helpers: shapes from docs/PROTOCOL.md, formatting and import checks.
import { t } from './i18n.svelte';
import type { MessageKey } from './messages';

export type Layer = 'role' | 'global';

export interface SearchResult {
  path: string;
  startLine: number;
  endLine: number;
  score: number;
  snippet: string;
  source?: string;
  layer?: string;
  role?: string;
}

/** How sure a search is that its results answer the query as a whole (memory.search `confidence`). */
export interface SearchConfidence {
  level: 'high' | 'medium' | 'low';
  /** The number in [0,1] the level comes from (memory.Confidence: the model's p; 0 without results). */
  score: number;
}

export interface SearchPayload {
  results: SearchResult[];
  confidence?: SearchConfidence;
  provider?: string;
  model?: string;
  /** The chat model's rewrite of a weakly answered question, searched too (memory.search.rewrite on). */
  rewrittenQuery?: string;
  /** How long the model took to rewrite, in ms (also when it failed or timed out). */
  rewriteMs?: number;
}

/** What the chat model's rewrite added to a search, or null when none was searched. */
export function searchRewrite(p: SearchPayload | null | undefined): { query: string; ms: number } | null {
  const q = typeof p?.rewrittenQuery === 'string' ? p.rewrittenQuery.trim() : '';
  if (!q) return null;
  return { query: q, ms: typeof p?.rewriteMs === 'number' && Number.isFinite(p.rewriteMs) ? Math.round(p.rewriteMs) : 0 };
}

/** The confidence of a memory.search answer, or null when absent or malformed (an older gateway). */
export function searchConfidence(p: SearchPayload | null | undefined): SearchConfidence | null {
  const c = p?.confidence;
  if (!c || (c.level !== 'high' && c.level !== 'medium' && c.level !== 'low')) return null;
  return { level: c.level, score: typeof c.score === 'number' && Number.isFinite(c.score) ? c.score : 0 };
}

/** Who the ACL in force lets read, write and collaborate on a file (memory.files `access`). */
export interface FileAccess {
  rule: string;
  line?: number;
  source?: 'file' | 'defaults' | 'admin-only' | (string & {});
  read: string[];
  write: string[];
  collaborate: string[];
  sessionOwner?: string;
}

export interface MemoryFile {
  path: string;
  size: number;
  mtime: number;
  chunks: number;
  layer?: string;
  role?: string;
  access?: FileAccess;
  /** An OpenClaw context file (SOUL.md, IDENTITY.md, USER.md, AGENTS.md, TOOLS.md, HEARTBEAT.md):
   *  main's persona and standing context, readable, never searched (no chunks). */
  context?: boolean;
}

export type LayerCode = 'L1' | 'L2' | 'L3' | 'other';

/** SPEC §5.2 layers: L1 global, L2 role, L3 session; anything else is "other". */
export function layerCode(layer?: string): LayerCode {
  switch (layer) {
    case 'global':
      return 'L1';
    case 'role':
      return 'L2';
    case 'session':
      return 'L3';
  }
  return 'other';
}

const LAYER_WORDS: Record<string, MessageKey> = {
  global: 'memory.badge.global',
  role: 'memory.badge.role',
  session: 'memory.badge.session',
};

/**
 * The badge text of a layer in the UI's language: "L1 global", "L2 role", "L3 session" ("L1 全局" …);
 * a layer this UI does not know as reported, "memory" ("记忆") when none.
 */
export function layerBadge(layer?: string): string {
  const code = layerCode(layer);
  if (code === 'other' || !layer) return layer || t('memory.badge.none');
  return `${code} ${t(LAYER_WORDS[layer])}`;
}

/** A principal as shown: `$session_owner` with the role it stands for, when known. */
function showPrincipal(p: string, owner?: string): string {
  return p === '$session_owner' && owner ? `$session_owner (${owner})` : p;
}

function principals(list: string[] | undefined, owner?: string): string {
  return list && list.length > 0 ? list.map((p) => showPrincipal(p, owner)).join(', ') : t('access.nobody');
}

/** "read: * · write: admin, main" (plus "· collaborate: …" when anyone may). */
export function accessLine(a?: FileAccess): string {
  if (!a) return '';
  const parts = [`${t('access.read')}: ${principals(a.read, a.sessionOwner)}`, `${t('access.write')}: ${principals(a.write, a.sessionOwner)}`];
  if (a.collaborate && a.collaborate.length > 0) parts.push(`${t('access.collaborate')}: ${principals(a.collaborate, a.sessionOwner)}`);
  return parts.join(' · ');
}

/** Tooltip naming the deciding rule: 'rule "roles/*\/**" (defaults)', 'rule "x" (.acl line 3)'. */
export function accessRule(a?: FileAccess): string {
  if (!a) return '';
  if (!a.rule) return t('access.noRule');
  const where = a.line ? t('access.aclLine', { line: a.line }) : a.source === 'file' ? '.acl' : a.source || t('access.builtin');
  return t('access.rule', { rule: a.rule, where });
}

export interface LayerGroup {
  code: LayerCode;
  title: string;
  files: MemoryFile[];
}


/** Files grouped by layer in L1, L2, L3, other order (empty groups left out; order within kept). */
export function groupByLayer(files: MemoryFile[], only: LayerCode | 'all' = 'all'): LayerGroup[] {
  const order: LayerCode[] = ['L1', 'L2', 'L3', 'other'];
  const groups = new Map<LayerCode, MemoryFile[]>(order.map((c) => [c, []]));
  for (const f of files) groups.get(layerCode(f.layer))!.push(f);
  return order
    .filter((c) => (only === 'all' || only === c) && groups.get(c)!.length > 0)
    .map((c) => ({ code: c, title: t(`memory.group.${c}`), files: groups.get(c)! }));
}

export interface MemoryStatus {
  state: 'indexing' | 'ready' | 'keyword-only' | 'error' | (string & {});
  workspace?: string;
  layout?: string;
  files?: number;
  chunks?: number;
  dirty?: boolean | number;
  provider?: string;
  model?: string;
  dims?: number;
  lastSync?: number;
  lastError?: string;
  progress?: { done: number; total: number };
}

export interface ImportPayload {
  path: string;
  bytes: number;
  chunks: number;
}

/** Largest file the browser sends to memory.import. */
export const MAX_IMPORT_BYTES = 4 * 1024 * 1024;
export const IMPORT_EXTENSIONS = ['.md', '.markdown', '.txt'];
export const IMPORT_ACCEPT = '.md,.txt,text/markdown,text/plain';

/** A search score for display: two decimals (the wire keeps full precision); '–' when not a number. */
export function formatScore(score: number): string {
  return typeof score === 'number' && Number.isFinite(score) ? score.toFixed(2) : '–';
}

export function formatLines(startLine: number, endLine: number): string {
  if (!endLine || endLine === startLine) return `${startLine}`;
  return `${startLine}-${endLine}`;
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '?';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** "global", "role: main", or whatever layer the gateway reported. */
export function layerLabel(layer?: string, role?: string): string {
  if (layer === 'global') return t('memory.global');
  if (role) return t('memory.roleChip', { role });
  return layer || t('memory.badge.none');
}

const STATE_WORDS: readonly string[] = ['ready', 'indexing', 'keyword-only', 'degraded', 'error'];

/** The index state in words ("ready", "索引中"); a state this UI does not know as sent. */
export function stateWord(state: string): string {
  return STATE_WORDS.includes(state) ? t(`status.state.${state}` as MessageKey) : state;
}

/** "ready · 1 file · 1 chunk · builtin/hashed-ngram-v2" (counts in words with their plurals). */
export function statusParts(s: MemoryStatus): string {
  let head = stateWord(s.state);
  if (s.state === 'indexing' && s.progress && s.progress.total > 0) head += ` ${s.progress.done}/${s.progress.total}`;
  const parts: string[] = [head];
  if (typeof s.files === 'number') parts.push(t('common.files', { n: s.files }));
  if (typeof s.chunks === 'number') parts.push(t('common.chunks', { n: s.chunks }));
  const pm = [s.provider, s.model].filter((x) => !!x).join('/');
  if (pm) parts.push(pm);
  return parts.join(' · ');
}

/** The top bar's memory line: "memory: ready · 1 file · 1 chunk · …". */
export function statusSummary(s: MemoryStatus | null): string {
  if (!s) return t('status.unknown');
  const [head, ...rest] = statusParts(s).split(' · ');
  return [t('status.memory', { state: head }), ...rest].join(' · ');
}

export function hasImportExtension(name: string): boolean {
  const lower = name.toLowerCase();
  return IMPORT_EXTENSIONS.some((ext) => lower.endsWith(ext));
}

export type CheckedFile = { ok: true; content: string } | { ok: false; error: string };

/** Checks a file's name, size and encoding before anything is sent to the gateway. */
export function checkImport(name: string, bytes: Uint8Array): CheckedFile {
  if (!hasImportExtension(name)) {
    return { ok: false, error: t('import.extension', { name }) };
  }
  if (bytes.byteLength > MAX_IMPORT_BYTES) {
    return { ok: false, error: t('import.tooLarge', { name, size: formatBytes(bytes.byteLength) }) };
  }
  let content: string;
  try {
    content = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return { ok: false, error: t('import.notUtf8', { name }) };
  }
  if (content.includes('\u0000')) {
    return { ok: false, error: t('import.binary', { name }) };
  }
  return { ok: true, content };
}

/** Reads a File (size checked first, so a huge file is never loaded). */
export async function readImportFile(file: File): Promise<CheckedFile> {
  if (!hasImportExtension(file.name)) return checkImport(file.name, new Uint8Array());
  if (file.size > MAX_IMPORT_BYTES) {
    return { ok: false, error: t('import.tooLarge', { name: file.name, size: formatBytes(file.size) }) };
  }
  let buf: ArrayBuffer;
  try {
    buf = await readBytes(file);
  } catch (e) {
    return { ok: false, error: t('import.unreadable', { name: file.name, error: e instanceof Error ? e.message : String(e) }) };
  }
  return checkImport(file.name, new Uint8Array(buf));
}

function readBytes(file: File): Promise<ArrayBuffer> {
  if (typeof file.arrayBuffer === 'function') return file.arrayBuffer();
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result as ArrayBuffer);
    r.onerror = () => reject(r.error ?? new Error('read failed'));
    r.readAsArrayBuffer(file);
  });
}

/** Splits a text into the parts before, inside and after a 1-based inclusive line range. */
export function splitLines(text: string, startLine: number, endLine: number): [string, string, string] {
  if (!startLine || startLine < 1) return [text, '', ''];
  const lines = text.split('\n');
  const s = Math.min(startLine, lines.length) - 1;
  const e = Math.min(Math.max(endLine || startLine, startLine), lines.length);
  const before = lines.slice(0, s).join('\n');
  const mid = lines.slice(s, e).join('\n');
  const after = lines.slice(e).join('\n');
  return [before ? before + '\n' : '', mid, after ? '\n' + after : ''];
}
