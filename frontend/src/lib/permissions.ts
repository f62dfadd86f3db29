// The permission prompt's lifecycle (SPEC §6 "Permission levels": a level above L1 asks the person,
// y/n in the UI; a grant holds 10 minutes for that session and level). Questions come from
// agent.permission events and, on connect, agent.permissions; each closes on
// agent.permission.answered (from any device), on its expiry, or once answered here.
// Wire shapes: docs/PROTOCOL.md (agent.permission, agent.permissions, agent.permission.answer).

import { t } from './i18n.svelte';
import type { MessageKey } from './messages';

export interface PermissionRequest {
  id: string;
  kind: 'level' | 'exec' | (string & {});
  runId: string;
  profileId: string;
  sessionId: string;
  messageId: string;
  tool: string;
  callId: string;
  level: 'L2' | 'L3' | (string & {});
  argsSummary: string;
  /** The English sentence (the fallback for a code this UI does not know). */
  reason: string;
  /** The sentence as a code (agent.ReasonCode* in backend/agent/reasons.go), '' when none. */
  reasonCode: string;
  /** The code's values by name (strings only). */
  reasonParams: Record<string, string>;
  /** Unix ms. */
  at: number;
  /** Unix ms after which the question is void (the server answers it "timeout"). */
  expires: number;
}

export interface PermissionState {
  /** Open questions, oldest first. */
  open: PermissionRequest[];
  /** Ids closed here (answered, expired): a late event or list does not reopen them; bounded. */
  closed: string[];
  /** The id whose answer is being sent, if any. */
  answering: string | null;
  /** The last failed answer, for people. */
  error: string | null;
}

export type PermissionAction =
  | { type: 'asked'; request: unknown; now: number }
  /** agent.permissions' answer: the open questions as the server holds them now. */
  | { type: 'list'; requests: unknown[]; now: number }
  | { type: 'answered'; id: string }
  | { type: 'tick'; now: number }
  | { type: 'answering'; id: string }
  | { type: 'answer-failed'; id: string; error: string; gone: boolean };

const MAX_CLOSED = 500;

export function initialPermissions(): PermissionState {
  return { open: [], closed: [], answering: null, error: null };
}

const s = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The string values of an object (anything else dropped). */
function stringParams(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!v || typeof v !== 'object' || Array.isArray(v)) return out;
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) if (typeof x === 'string') out[k] = x;
  return out;
}

/** A well-formed request, or null. */
export function parseRequest(v: unknown): PermissionRequest | null {
  const r = v as Record<string, unknown>;
  if (!r || typeof r !== 'object' || typeof r.id !== 'string' || r.id === '') return null;
  const expires = typeof r.expires === 'number' ? r.expires : 0;
  return {
    id: r.id,
    kind: s(r.kind) || 'level',
    runId: s(r.runId),
    profileId: s(r.profileId),
    sessionId: s(r.sessionId),
    messageId: s(r.messageId),
    tool: s(r.tool) || '?',
    callId: s(r.callId),
    level: s(r.level),
    argsSummary: s(r.argsSummary),
    reason: s(r.reason),
    reasonCode: s(r.reasonCode),
    reasonParams: stringParams(r.reasonParams),
    at: typeof r.at === 'number' ? r.at : 0,
    expires,
  };
}

function close(state: PermissionState, ids: string[]): PermissionState {
  if (ids.length === 0) return state;
  const gone = new Set(ids);
  const closed = [...state.closed.filter((c) => !gone.has(c)), ...ids].slice(-MAX_CLOSED);
  return {
    ...state,
    open: state.open.filter((r) => !gone.has(r.id)),
    closed,
    answering: state.answering && gone.has(state.answering) ? null : state.answering,
    error: state.answering && gone.has(state.answering) ? null : state.error,
  };
}

function sortOpen(list: PermissionRequest[]): PermissionRequest[] {
  return list
    .map((r, i) => [r, i] as const)
    .sort((a, b) => a[0].at - b[0].at || a[1] - b[1])
    .map(([r]) => r);
}

function live(r: PermissionRequest, now: number): boolean {
  return r.expires === 0 || r.expires > now;
}

export function reducePermissions(state: PermissionState, action: PermissionAction): PermissionState {
  switch (action.type) {
    case 'asked': {
      const r = parseRequest(action.request);
      if (!r || state.closed.includes(r.id) || !live(r, action.now)) return state;
      const i = state.open.findIndex((x) => x.id === r.id);
      const open = state.open.slice();
      if (i >= 0) open[i] = r;
      else open.push(r);
      return { ...state, open: sortOpen(open) };
    }
    case 'list': {
      const listed = (Array.isArray(action.requests) ? action.requests : [])
        .map(parseRequest)
        .filter((r): r is PermissionRequest => r !== null && !state.closed.includes(r.id) && live(r, action.now));
      // The server's list is the truth: a question it no longer holds was answered meanwhile.
      const ids = new Set(listed.map((r) => r.id));
      const next = close(state, state.open.filter((r) => !ids.has(r.id)).map((r) => r.id));
      return { ...next, open: sortOpen(listed) };
    }
    case 'answered':
      return state.open.some((r) => r.id === action.id) || !state.closed.includes(action.id) ? close(state, [action.id]) : state;
    case 'tick': {
      const expired = state.open.filter((r) => !live(r, action.now)).map((r) => r.id);
      return close(state, expired);
    }
    case 'answering':
      return state.open.some((r) => r.id === action.id) ? { ...state, answering: action.id, error: null } : state;
    case 'answer-failed': {
      // NOT_FOUND: answered elsewhere, timed out or cancelled meanwhile: the question is gone.
      if (action.gone) return close(state, [action.id]);
      return { ...state, answering: state.answering === action.id ? null : state.answering, error: action.error };
    }
  }
}

/** The question the prompt shows: the oldest open one. */
export function current(state: PermissionState): PermissionRequest | null {
  return state.open[0] ?? null;
}

/** Seconds left until the question expires (0 when past; null when it has no expiry). */
export function secondsLeft(r: PermissionRequest, now: number): number | null {
  if (!r.expires) return null;
  return Math.max(0, Math.ceil((r.expires - now) / 1000));
}

/** "m:ss" for a number of seconds. */
export function formatCountdown(sec: number): string {
  const m = Math.floor(sec / 60);
  const r = sec % 60;
  return `${m}:${r < 10 ? '0' : ''}${r}`;
}

/** SPEC §6 permission levels, in words (lib/messages.ts level.*); an unknown level as sent. */
export function levelLabel(level: string): string {
  return level === 'L0' || level === 'L1' || level === 'L2' || level === 'L3' ? t(`level.${level}`) : level;
}

/**
 * What a yes grants, as the prompt says it: a question of kind "level" grants the session that
 * level for 10 minutes (agent.DefaultGrantTTL); any other kind ("exec": one command under exec
 * approval "ask", "node": one node command such as camera.snap, asked on every call) is for this
 * call only and is never remembered (agent.Permissions.AskOnce).
 */
export function answerHolds(kind: string): string {
  return kind === 'level' ? t('perm.holds') : t('perm.thisCall');
}

/** Events the prompt reduces. */
export const PERMISSION_EVENTS = ['agent.permission', 'agent.permission.answered'] as const;

/**
 * The params each reason code needs (backend/agent/reasons.go; docs/PROTOCOL.md agent.permission).
 * A code not listed here, or sent without one of its params, is shown as the server's English
 * sentence: a newer gateway's reason still reaches the person, in English.
 */
export const REASON_PARAMS: Record<string, readonly string[]> = {
  level: ['level', 'ttlSeconds'],
  'exec-run': ['command', 'dir'],
  'node-run': ['command', 'node'],
  'node-run-caps': ['command', 'caps'],
  'canvas-eval': ['target'],
};

/** A node question's details in words: which camera, or what system.run runs and where. */
function nodeDetail(p: Record<string, string>): string {
  if (p.facing) return p.facing === 'back' || p.facing === 'front' ? t(`perm.reason.facing.${p.facing}`) : t('perm.reason.facing', { facing: p.facing });
  if (p.argv) return p.cwd ? t('perm.reason.argvIn', { argv: p.argv, cwd: p.cwd }) : t('perm.reason.argv', { argv: p.argv });
  return '';
}

/** The question's reason in the UI's language (by its code), else the server's sentence. */
export function reasonText(r: PermissionRequest): string {
  const need = Object.hasOwn(REASON_PARAMS, r.reasonCode) ? REASON_PARAMS[r.reasonCode] : undefined;
  const p = r.reasonParams;
  if (!need || need.some((k) => typeof p[k] !== 'string')) return r.reason;
  const key = `perm.reason.${r.reasonCode}` as MessageKey;
  switch (r.reasonCode) {
    case 'level': {
      const minutes = Math.max(1, Math.round(Number(p.ttlSeconds) / 60));
      return t(key, { role: p.role || t('perm.reason.agent'), level: levelLabel(p.level), minutes: Number.isFinite(minutes) ? minutes : '?' });
    }
    case 'node-run':
    case 'node-run-caps':
      return t(key, { ...p, detail: nodeDetail(p) });
    default:
      return t(key, p);
  }
}
