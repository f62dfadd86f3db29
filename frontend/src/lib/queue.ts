// The queue of messages typed while a run is busy (SPEC §9 "a queue of pending messages"): a
// session answers one message at a time (docs/PROTOCOL.md chat.send: CONFLICT while a run is in
// progress), so what the person sends meanwhile waits here, in order, and goes out one by one as
// each run ends. A queued message can be removed until it is sent. Drafts per profile are here too.
import { safeGet, safeSet } from './util';

export interface QueuedMessage {
  /** Local key; also the key of its chat entry once sent. */
  key: string;
  content: string;
  /** Unix ms when it was queued. */
  queuedAt: number;
}

export type Queue = readonly QueuedMessage[];

/**
 * Whether a message sent now must wait: while a run (or a send) is in progress, and while others
 * wait already (a new message never overtakes the queue).
 */
export function mustQueue(queue: Queue, busy: boolean): boolean {
  return busy || queue.length > 0;
}

/** Adds a message at the end (an empty text is not queued). */
export function enqueue(queue: Queue, m: QueuedMessage): Queue {
  if (m.content.trim() === '' || queue.some((q) => q.key === m.key)) return queue;
  return [...queue, m];
}

/** Removes a message that is still waiting. */
export function removeQueued(queue: Queue, key: string): Queue {
  const next = queue.filter((q) => q.key !== key);
  return next.length === queue.length ? queue : next;
}

/**
 * The message to send now, and the queue without it: the oldest, when nothing is in progress and
 * the gateway is reachable; else none.
 */
export function takeNext(queue: Queue, busy: boolean, connected: boolean): { next: QueuedMessage | null; rest: Queue } {
  if (busy || !connected || queue.length === 0) return { next: null, rest: queue };
  return { next: queue[0], rest: queue.slice(1) };
}

/** Where a profile's draft is kept (localStorage). */
export function draftKey(profileId: string): string {
  return `atrium.draft.${profileId}`;
}

export function loadDraft(storage: Storage | null, profileId: string): string {
  return safeGet(storage, draftKey(profileId)) ?? '';
}

/** Keeps the draft; an empty (or blank) one is removed. */
export function saveDraft(storage: Storage | null, profileId: string, text: string): void {
  safeSet(storage, draftKey(profileId), text.trim() === '' ? null : text);
}
