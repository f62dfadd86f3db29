// The first start (issue 17): where memory lives. What setup.status returns, and the words the
// first-start screen shows for each folder offered. Network code stays in gateway.ts; this module
// is pure.

import { t } from './i18n.svelte';
import { GatewayError } from './gateway';

/** What a folder holds as a workspace (backend memory.WorkspaceSummary). */
export interface WorkspaceOption {
  kind: 'new' | 'openclaw';
  path: string;
  exists: boolean;
  notes?: number;
  daily?: number;
  memoryFile?: boolean;
  context?: string[];
  sample?: string[];
  bytes?: number;
  partial?: boolean;
}

export interface SetupStatus {
  chosen: boolean;
  workspace?: string;
  source?: string;
  missing?: string;
  home: string;
  stateDir: string;
  options: WorkspaceOption[];
  picker: boolean;
}

export interface SetupResult {
  workspace: string;
  created: boolean;
  restarting: boolean;
}

/** The choices on the screen: a folder offered, or one the person types. */
export type Choice = 'openclaw' | 'new' | 'other';

/** The choice selected at first: the OpenClaw workspace when one was found (its memory is there), else a new ~/Atrium. */
export function firstChoice(s: SetupStatus): Choice {
  return s.options.some((o) => o.kind === 'openclaw' && o.exists) ? 'openclaw' : 'new';
}

/** "~/Atrium" for a path in the home folder (shorter to read), else the path. */
export function shortPath(path: string, home: string): string {
  if (home && (path === home || path.startsWith(home.endsWith('/') ? home : home + '/'))) return '~' + path.slice(home.replace(/\/$/, '').length);
  return path;
}

/** One line on what a folder holds: "12 notes (8 daily logs) · MEMORY.md · SOUL.md, USER.md", or that it is empty / new. */
export function contentsText(o: WorkspaceOption): string {
  if (!o.exists) return t('setup.willCreate');
  const notes = o.notes ?? 0;
  if (notes === 0 && !(o.context ?? []).length) return t('setup.emptyFolder');
  const parts = [o.daily ? t('setup.notesDaily', { notes: t('setup.notes', { n: notes }), daily: t('setup.daily', { n: o.daily }) }) : t('setup.notes', { n: notes })];
  if (o.memoryFile) parts.push('MEMORY.md');
  if (o.context?.length) parts.push(o.context.join(', '));
  return parts.join(' · ') + (o.partial ? ` ${t('setup.partial')}` : '');
}

/** The params of setup.choose for a choice: a folder offered is created when missing (a new ~/Atrium); a typed one too, when its parent exists (the server checks). */
export function chooseParams(choice: Choice, s: SetupStatus, typed: string): { path: string; create: boolean } | null {
  if (choice === 'other') {
    const path = typed.trim();
    return path ? { path, create: true } : null;
  }
  const o = s.options.find((x) => x.kind === choice);
  return o ? { path: o.path, create: true } : null;
}

/** Whether a failed setup.choose means the app is restarting (the connection closed before the answer came), not a refusal. */
export function lostConnection(err: unknown): boolean {
  return err instanceof GatewayError && err.code === 'UNAVAILABLE' && /connection lost|not connected/i.test(err.message);
}
