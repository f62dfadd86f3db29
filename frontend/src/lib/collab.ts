// Collaborations between roles as the window shows them (issue 24 item 4; docs/PROTOCOL.md
// "Routing and collaboration"): the list from collab.list, kept up to date by collab.changed, the
// open ones (pending, accepted) with the time their token has left, the ones the person must
// accept (needsPerson), and the history with each result. Pure functions: the components and the
// tests share them.

export type CollabStatus = 'pending' | 'accepted' | 'completed' | 'declined' | 'expired';

export interface CollabEvent {
  at: string;
  role: string;
  action: string;
  detail?: string;
}

export interface Collaboration {
  collabId: string;
  from: string;
  to: string;
  task: string;
  context: string[];
  status: CollabStatus;
  createdAt: string;
  expiresAt: string;
  acceptedAt?: string;
  completedAt?: string;
  completedBy?: string;
  result?: { output: string; importance: number; artifacts?: string[] };
  needsPerson?: boolean;
  history?: CollabEvent[];
}

export interface SharedView {
  files: { path: string }[];
  context: { path: string; text: string }[];
  withheld: number;
}

/** collab.show's answer. */
export interface Shown {
  collaboration: Collaboration;
  shared?: SharedView;
}

/** The status as of now: an open one past its expiry is expired (the server says so on its next answer). */
export function statusAt(c: Collaboration, now: number): CollabStatus {
  if ((c.status === 'pending' || c.status === 'accepted') && Date.parse(c.expiresAt) <= now) return 'expired';
  return c.status;
}

export function isOpen(c: Collaboration, now: number): boolean {
  const s = statusAt(c, now);
  return s === 'pending' || s === 'accepted';
}

/** Pending ones only the person may accept, oldest first (the prompt asks about the first). */
export function awaitingPerson(list: Collaboration[], now: number): Collaboration[] {
  return list.filter((c) => statusAt(c, now) === 'pending' && c.needsPerson).sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt));
}

/** Merges a collab.changed payload into the list (newest first, by creation time). */
export function upsert(list: Collaboration[], c: unknown): Collaboration[] {
  if (!isCollaboration(c)) return list;
  const out = list.filter((x) => x.collabId !== c.collabId);
  out.push(c);
  return out.sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt));
}

export function isCollaboration(c: unknown): c is Collaboration {
  if (!c || typeof c !== 'object') return false;
  const x = c as Record<string, unknown>;
  return typeof x.collabId === 'string' && typeof x.from === 'string' && typeof x.to === 'string' && typeof x.status === 'string' && typeof x.expiresAt === 'string';
}

/** Time left as "1 h 05 min", "4 min 09 s", "12 s" (units through the caller's words). */
export function remaining(ms: number): { h: number; m: number; s: number } {
  const total = Math.max(0, Math.floor(ms / 1000));
  return { h: Math.floor(total / 3600), m: Math.floor((total % 3600) / 60), s: total % 60 };
}
