// Routing in the chat box (issue 24 item 2; SPEC §5.4, docs/PROTOCOL.md "Routing and collaboration"):
// `@name` completion over the roles, and where chat.route's answer sends a message. Pure functions;
// ChatPanel calls chat.route and shows "routed to X because …" before anything is sent.
import type { WorkbenchState } from './workbench';

/** chat.route's answer. */
export interface RouteResult {
  role: string;
  reason: 'mention' | 'capability' | 'similarity' | 'stay' | 'ask' | string;
  candidates: string[];
  matched?: string[];
  score?: number;
}

/** A routed message waiting for the person: send it to `profileId` (or pick another role). */
export interface RoutePlan {
  text: string;
  route: RouteResult;
  /** The role it goes to (route.role, or the person's choice). */
  role: string;
}

/** Where a message was routed: the role, chat.route's answer, and whether the person chose another. */
export interface Routed {
  role: string;
  route: RouteResult;
  chosen: boolean;
}

/** The most completions listed at once. */
export const MAX_MENTIONS = 8;

// A mention starts the text or follows a space or an opening bracket (not inside a word or an
// e-mail address, as the gateway's router reads it); ＠ (full width) counts too.
const MENTION_AT = /(^|[\s(（【「])[@＠]([\p{L}\p{N}_.-]*)$/u;

/**
 * The mention being typed just before `caret`: where its @ is and what follows it, or null when
 * the caret is not in a mention.
 */
export function mentionAt(text: string, caret: number): { start: number; query: string } | null {
  const m = MENTION_AT.exec(text.slice(0, caret));
  if (!m) return null;
  return { start: caret - m[2].length - 1, query: m[2] };
}

/** The roles whose name starts with (then contains) the query, case-insensitive, at most MAX_MENTIONS. */
export function mentionCandidates(roles: string[], query: string): string[] {
  const q = query.toLowerCase();
  const starts = roles.filter((r) => r.toLowerCase().startsWith(q));
  const contains = roles.filter((r) => !r.toLowerCase().startsWith(q) && r.toLowerCase().includes(q));
  return [...starts, ...contains].slice(0, MAX_MENTIONS);
}

/** The text with the mention at `start` (up to `caret`) completed to `@role `, and the new caret. */
export function completeMention(text: string, start: number, caret: number, role: string): { text: string; caret: number } {
  const insert = `@${role} `;
  return { text: text.slice(0, start) + insert + text.slice(caret).replace(/^\s+/, ''), caret: start + insert.length };
}

/** Whether the text names a role with @ (so it is routed even outside "ask the right agent" mode). */
export function hasMention(text: string): boolean {
  return /(^|[\s(（【「])[@＠][\p{L}\p{N}_]/u.test(text);
}

/** The roles one may mention: main and every role profile, by name. */
export function mentionableRoles(wb: WorkbenchState): string[] {
  const out = ['main'];
  for (const p of wb.profiles) if (p.path && !out.includes(p.id)) out.push(p.id);
  return out;
}

/**
 * The chat profile a role's messages go to: main itself; for a role, the instance of it that runs
 * (the first listed), else `<role>-1` (a send from the desktop starts it; docs/PROTOCOL.md chat.send).
 */
export function routeTarget(wb: WorkbenchState, role: string): string {
  if (role === 'main') return 'main';
  const running = wb.instances.find((s) => s.profileId === role && s.state !== 'stopped');
  return running ? running.instanceId : `${role}-1`;
}
