// Chat state as a pure reducer: local sends, streamed run events and history pages.
//
// Order (docs/PROTOCOL.md "Message order"): messages are sorted by ts, ties in arrival order. The
// server gives a run's reply the ts of its question + 1 and questions strictly increasing ts, so a
// reply stays right after its question however overlapping runs end; live entries use the same
// rule (a streaming reply gets the question's server ts + 1, from chat.thinking's userMessage or
// the history snapshot's startedAt).
import { errorCode, errorText } from './util';

export type Role = 'user' | 'assistant';
/**
 * `interrupted`: the run was cut short by the server stopping (stored error "interrupted"), or it
 * vanished from the server (not running any more, nothing stored) while this client was away.
 */
export type MessageState = 'streaming' | 'final' | 'cancelled' | 'interrupted' | 'error';

export interface Source {
  path: string;
  startLine: number;
  endLine: number;
}

/** The session main's heartbeat turns run in (chat.HeartbeatSession): their answers carry it. */
export const HEARTBEAT_SESSION = 'heartbeat';

/** A persisted message as the gateway sends it (history.profile, chat.final). */
export interface WireMessage {
  id: string;
  profileId?: string;
  sessionId?: string;
  runId?: string;
  role: Role;
  content: string;
  ts: number;
  sources?: Source[];
  error?: unknown;
  /** Set when the gateway sent only the first part of a long text (contentBytes: its whole size). */
  contentTruncated?: boolean;
  contentBytes?: number;
  /** The run's tool calls (history.ToolRecord); only their pictures are read here. */
  tools?: Array<{ callId?: string; tool?: string; images?: WireImage[] }>;
}

/** A picture a tool call returned (history.ImageRef): shown through media.get by its media id. */
export interface WireImage {
  path?: string;
  mime?: string;
  mediaId?: string;
  width?: number;
  height?: number;
  bytes?: number;
}

/** A picture shown in a message: a media store id (32 hex characters) and what is known of it. */
export interface ChatImage {
  mediaId: string;
  mime: string;
  width?: number;
  height?: number;
}

const MEDIA_ID = /^[0-9a-f]{32}$/;

/** The pictures of a message's tool calls that the media store serves (by media id), in order, once each. */
export function messageImages(tools: WireMessage['tools']): ChatImage[] | undefined {
  if (!Array.isArray(tools)) return undefined;
  const out: ChatImage[] = [];
  for (const tc of tools) {
    if (!tc || !Array.isArray(tc.images)) continue;
    for (const img of tc.images) {
      if (!img || typeof img.mediaId !== 'string' || !MEDIA_ID.test(img.mediaId)) continue;
      if (out.some((o) => o.mediaId === img.mediaId)) continue;
      const c: ChatImage = { mediaId: img.mediaId, mime: typeof img.mime === 'string' ? img.mime : '' };
      if (typeof img.width === 'number' && img.width > 0) c.width = img.width;
      if (typeof img.height === 'number' && img.height > 0) c.height = img.height;
      out.push(c);
    }
  }
  return out.length > 0 ? out : undefined;
}

export interface ChatMessage {
  /** Stable render key: the server id, or "local:…" / "run:…" before the id is known. */
  key: string;
  /** Server message id, once known. */
  id: string | null;
  role: Role;
  content: string;
  ts: number;
  state: MessageState;
  runId?: string;
  sessionId?: string;
  sources?: Source[];
  /** Pictures the run's tools returned (a node's photo), shown inline. */
  images?: ChatImage[];
  /** What went wrong, for people (no protocol code). */
  error?: string;
  /** The protocol error code behind `error`, when known (for logic and tooltips). */
  errorCode?: string;
  /** The stored text's size in bytes when only its first part is shown (the gateway cut it). */
  cutFrom?: number;
  /** The agent accepted the run and nothing streamed yet. */
  thinking?: boolean;
  /** Streamed deltas by chunk seq (assistant messages while streaming). */
  chunks?: Array<[number, string]>;
  /**
   * Set when the entry was seeded from a history snapshot (history.profile `active`): its first
   * chunk holds the text of chunks 1..baseSeq, so chunks with seq ≤ baseSeq are already shown.
   */
  baseSeq?: number;
  /** A user message whose chat.send has not been acknowledged yet. */
  pending?: boolean;
}

export interface ChatState {
  profileId: string;
  messages: ChatMessage[];
  /** The run started by this client that may still be going (drives Cancel). */
  activeRunId: string | null;
  /** Runs that reached final / cancelled / error (bounded). */
  doneRuns: string[];
  /** This client's chat session (runs of this session can be cancelled from here). */
  sessionId: string | null;
  /**
   * The last time (Unix ms) this client saw its session closed (`/new`, `/reset`, a daily or idle
   * reset: chat.reset): older messages stay shown, below a divider, but are not sent as history.
   */
  resetAt?: number;
  /** What closed it: the reason and the note written (chat.reset's ResetResult). */
  reset?: ResetInfo;
}

/** A closed session as chat.send's `reset` and the chat.reset event carry it (docs/PROTOCOL.md). */
export interface ResetInfo {
  profileId?: string;
  closedSessionId?: string;
  sessionId: string;
  reason: string;
  note?: string;
  messages?: number;
  noteError?: string;
}

/** Whether a message is a session command the gateway answers itself (`/new`, `/reset`). */
export function isSessionCommand(text: string): boolean {
  const t = text.trim().toLowerCase();
  return t === '/new' || t === '/reset';
}

/** A run in progress as history.profile lists it (`active`): the text of its chunks 1..seq. */
export interface WireActiveRun {
  runId: string;
  profileId?: string;
  sessionId?: string;
  messageId?: string;
  content: string;
  seq: number;
  startedAt: number;
}

export type ChatAction =
  | { type: 'send'; key: string; content: string; ts: number; sessionId?: string | null }
  /**
   * chat.send answered. userMessageId is the stored user message's id; messageId is the id the
   * assistant reply will have (as the wire names it), never the user message's.
   */
  | { type: 'sent'; key: string; userMessageId?: string; messageId?: string; runId?: string; sessionId?: string }
  | { type: 'send-failed'; key: string; error: string; code?: string }
  | { type: 'event'; event: string; payload: any; now: number }
  /**
   * A history.profile page. `known`: the runs this client thought in progress when it asked (see
   * runsInProgress); one the server neither lists as active nor has a stored reply for is gone.
   * `present`: the ids of stored messages this client held when it asked (see storedIds) and
   * `hasOlder`: the page has a nextBefore cursor; a present message the page should hold (its ts
   * inside the page's range) but does not was deleted while this client was not listening.
   */
  | {
      type: 'history';
      messages: WireMessage[];
      active?: WireActiveRun[];
      known?: string[];
      present?: string[];
      hasOlder?: boolean;
    }
  /** Messages from this client's local cache (see cacheEntries), merged by id and timestamp. */
  | { type: 'cache'; messages: WireMessage[] }
  | { type: 'deleted'; messageId: string }
  /** Drops a local message that was never stored (a send that failed, before it is sent again). */
  | { type: 'discard'; key: string }
  /**
   * A session was closed (chat.send's `reset`, or a chat.reset event): when it is this client's
   * session (or `own`: this client closed it), the next message goes to `reset.sessionId`.
   */
  | { type: 'reset'; reset: ResetInfo; now: number; own?: boolean }
  /** A session the gateway started for this panel before its first message (talk.open's sessionKey): adopted only when the panel has none. */
  | { type: 'session'; sessionId: string };

const MAX_DONE_RUNS = 500;

export function initialChat(profileId: string, sessionId: string | null = null): ChatState {
  return { profileId, messages: [], activeRunId: null, doneRuns: [], sessionId };
}

/** The history store marks a reply cut short by chat.cancel with error "cancelled" (backend/history ErrorCancelled). */
export const CANCELLED_MARK = 'cancelled';
/** …and one cut short by the server stopping with error "interrupted" (backend/history ErrorInterrupted). */
export const INTERRUPTED_MARK = 'interrupted';

/** The state a stored message says it ended in: its error mark, else final. */
function storedState(m: WireMessage, err: string | undefined): MessageState {
  if (m.error === CANCELLED_MARK) return 'cancelled';
  if (m.error === INTERRUPTED_MARK) return 'interrupted';
  return err ? 'error' : 'final';
}

export function fromWire(m: WireMessage, state?: MessageState): ChatMessage {
  const marked = m.error === CANCELLED_MARK || m.error === INTERRUPTED_MARK;
  const err = !marked && m.error !== undefined && m.error !== null && m.error !== '' ? errorText(m.error) : undefined;
  return {
    key: m.id,
    id: m.id,
    role: m.role === 'user' ? 'user' : 'assistant',
    content: typeof m.content === 'string' ? m.content : '',
    ts: typeof m.ts === 'number' ? m.ts : 0,
    state: state ?? storedState(m, err),
    runId: m.runId,
    sessionId: m.sessionId,
    sources: Array.isArray(m.sources) && m.sources.length > 0 ? m.sources : undefined,
    images: messageImages(m.tools),
    error: err,
    errorCode: err ? errorCode(m.error) || undefined : undefined,
    cutFrom: m.contentTruncated && typeof m.contentBytes === 'number' ? m.contentBytes : undefined,
  };
}

function isWireMessage(m: unknown): m is WireMessage {
  return !!m && typeof m === 'object' && typeof (m as WireMessage).id === 'string' && (m as WireMessage).id !== '';
}

/** Stable sort by timestamp (insertion order breaks ties). */
function sorted(list: ChatMessage[]): ChatMessage[] {
  return list
    .map((m, i) => [m, i] as const)
    .sort((a, b) => a[0].ts - b[0].ts || a[1] - b[1])
    .map(([m]) => m);
}

function markDone(state: ChatState, runId: string | undefined): ChatState {
  if (!runId) return state;
  const doneRuns = state.doneRuns.includes(runId) ? state.doneRuns : [...state.doneRuns, runId].slice(-MAX_DONE_RUNS);
  const activeRunId = state.activeRunId === runId ? null : state.activeRunId;
  return { ...state, doneRuns, activeRunId };
}

function runIndex(list: ChatMessage[], runId: string): number {
  return list.findIndex((m) => m.role === 'assistant' && m.runId === runId);
}

/** Index of the message with this server id (and role, when given: ids never match across roles). */
function idIndex(list: ChatMessage[], id: string, role?: Role): number {
  return list.findIndex((m) => m.id === id && (role === undefined || m.role === role));
}

function joinChunks(chunks: Array<[number, string]>): string {
  return chunks.map(([, d]) => d).join('');
}

/**
 * A run's local reply entry. Its ts follows the ordering rule (question's server ts + 1) when the
 * event carries the question (chat.thinking's userMessage); else `now` until the stored reply comes.
 */
function streamingEntry(runId: string, payload: any, now: number): ChatMessage {
  const question = payload?.userMessage;
  return {
    key: `run:${runId}`,
    id: null,
    role: 'assistant',
    content: '',
    ts: isWireMessage(question) && typeof question.ts === 'number' ? question.ts + 1 : now,
    state: 'streaming',
    runId,
    sessionId: typeof payload?.sessionId === 'string' ? payload.sessionId : undefined,
    thinking: true,
    chunks: [],
  };
}

/**
 * Puts a persisted message in place of the run's local entry (or merges it with an existing copy),
 * then re-sorts (the stored ts places it). `state` is what the event means (final, cancelled); the
 * stored message's own mark (cancelled, interrupted, an error) wins over it.
 */
function settle(list: ChatMessage[], runId: string, wire: WireMessage, state: MessageState): ChatMessage[] {
  const next = list.slice();
  const ri = runIndex(next, runId);
  const ii = idIndex(next, wire.id, 'assistant');
  const fresh = fromWire(wire);
  const msg = { ...fresh, state: fresh.state === 'final' ? state : fresh.state, runId: wire.runId ?? runId };
  // A long answer the gateway cut in chat.final: the streamed text shown so far is whole, keep it.
  const local = ri >= 0 ? next[ri] : ii >= 0 ? next[ii] : undefined;
  if (msg.cutFrom !== undefined && local && local.content.length > msg.content.length && local.content.startsWith(msg.content)) {
    msg.content = local.content;
    msg.cutFrom = undefined;
  }
  if (ii >= 0) {
    next[ii] = { ...msg, key: next[ii].key };
    if (ri >= 0 && ri !== ii) next.splice(ri, 1);
  } else if (ri >= 0) {
    next[ri] = { ...msg, key: next[ri].key };
  } else {
    next.push(msg);
  }
  return sorted(next);
}

/**
 * Merges the stored user message a run answers (chat.thinking's userMessage), so every client shows
 * the question, once: it updates the copy with its id; else it names the sender's unacknowledged
 * local copy (same text and session, or one acknowledged without an id for this run); else inserts it.
 */
function mergeQuestion(list: ChatMessage[], wire: WireMessage, runId: string): ChatMessage[] {
  const fresh = { ...fromWire(wire, 'final'), runId: wire.runId ?? runId };
  let i = idIndex(list, wire.id, 'user');
  if (i < 0) i = list.findIndex((m) => m.role === 'user' && m.id === null && m.runId === fresh.runId);
  if (i < 0) {
    i = list.findIndex(
      (m) => m.role === 'user' && m.id === null && m.pending && !m.runId && m.content === fresh.content &&
        (!m.sessionId || !fresh.sessionId || m.sessionId === fresh.sessionId),
    );
  }
  const next = list.slice();
  if (i >= 0) {
    const cur = next[i];
    if (cur.id === fresh.id && cur.ts === fresh.ts && cur.runId === fresh.runId) return list;
    next[i] = { ...cur, id: fresh.id, ts: fresh.ts, runId: fresh.runId, sessionId: fresh.sessionId ?? cur.sessionId };
  } else {
    next.push(fresh);
  }
  return sorted(next);
}

function onEvent(state: ChatState, event: string, payload: any, now: number): ChatState {
  if (!payload || typeof payload !== 'object') return state;
  if (event === 'message.deleted') {
    return typeof payload.messageId === 'string' ? reduceChat(state, { type: 'deleted', messageId: payload.messageId }) : state;
  }
  if (typeof payload.profileId === 'string' && payload.profileId !== state.profileId) return state;
  const runId: string | undefined = typeof payload.runId === 'string' && payload.runId ? payload.runId : undefined;
  if (!runId) return state;
  if (payload.heartbeat === true) {
    // A heartbeat turn (issue 24 item 7): nothing of it is shown until its answer is in; an answer of
    // HEARTBEAT_OK (silent) never is, another one arrives as main's message.
    if (event !== 'chat.final' || payload.silent === true || !isWireMessage(payload.message)) return state;
    return markDone({ ...state, messages: settle(state.messages, runId, payload.message, 'final') }, runId);
  }
  const done = state.doneRuns.includes(runId);
  if (!done && (event === 'chat.thinking' || event === 'chat.chunk') && state.activeRunId !== runId &&
      state.sessionId && payload.sessionId === state.sessionId) {
    // A run of our session (e.g. after a reload mid-run): make it cancellable here.
    state = { ...state, activeRunId: runId };
  }

  switch (event) {
    case 'chat.thinking': {
      if (isWireMessage(payload.userMessage) && payload.userMessage.role === 'user' &&
          (!payload.userMessage.profileId || payload.userMessage.profileId === state.profileId)) {
        const messages = mergeQuestion(state.messages, payload.userMessage, runId);
        if (messages !== state.messages) state = { ...state, messages };
      }
      if (done) return state;
      const i = runIndex(state.messages, runId);
      if (i >= 0) {
        const cur = state.messages[i];
        if (cur.state !== 'streaming' || cur.content) return state;
        const messages = state.messages.slice();
        messages[i] = { ...cur, thinking: true };
        return { ...state, messages };
      }
      return { ...state, messages: sorted([...state.messages, streamingEntry(runId, payload, now)]) };
    }
    case 'chat.chunk': {
      if (done) return state;
      const delta = typeof payload.delta === 'string' ? payload.delta : '';
      let messages = state.messages;
      let i = runIndex(messages, runId);
      if (i < 0) {
        messages = sorted([...messages, streamingEntry(runId, payload, now)]);
        i = runIndex(messages, runId);
      }
      const cur = messages[i];
      if (cur.state !== 'streaming') return state;
      const chunks = (cur.chunks ?? []).slice();
      const seq = typeof payload.seq === 'number' ? payload.seq : (chunks.length ? chunks[chunks.length - 1][0] + 1 : 0);
      // Already shown: a repeat, or part of the history snapshot the entry was seeded from.
      const seen = (cur.baseSeq !== undefined && seq <= cur.baseSeq) || chunks.some(([s]) => s === seq);
      if (seen) return messages === state.messages ? state : { ...state, messages };
      let at = chunks.length;
      while (at > 0 && chunks[at - 1][0] > seq) at--;
      chunks.splice(at, 0, [seq, delta]);
      messages = messages === state.messages ? messages.slice() : messages;
      messages[i] = { ...cur, chunks, content: joinChunks(chunks), thinking: false };
      return { ...state, messages };
    }
    case 'chat.final': {
      if (!isWireMessage(payload.message)) {
        // No message: keep what streamed and mark it final.
        const i = runIndex(state.messages, runId);
        if (i < 0) return markDone(state, runId);
        const messages = state.messages.slice();
        messages[i] = { ...messages[i], state: 'final', thinking: false, chunks: undefined, baseSeq: undefined };
        return markDone({ ...state, messages }, runId);
      }
      return markDone({ ...state, messages: settle(state.messages, runId, payload.message, 'final') }, runId);
    }
    case 'chat.cancelled': {
      // reason "interrupted": the server stopped; else the person cancelled it.
      const ended: MessageState = payload.reason === INTERRUPTED_MARK ? 'interrupted' : 'cancelled';
      if (isWireMessage(payload.message)) {
        return markDone({ ...state, messages: settle(state.messages, runId, payload.message, ended) }, runId);
      }
      const i = runIndex(state.messages, runId);
      let messages: ChatMessage[];
      if (i >= 0) {
        messages = state.messages.slice();
        const cur = messages[i];
        messages[i] = { ...cur, state: cur.state === 'final' ? 'final' : ended, thinking: false, chunks: undefined, baseSeq: undefined };
      } else {
        messages = sorted([...state.messages, { ...streamingEntry(runId, payload, now), state: ended, thinking: false, chunks: undefined, baseSeq: undefined }]);
      }
      return markDone({ ...state, messages }, runId);
    }
    case 'chat.error': {
      const text = errorText(payload.error) || 'the run failed';
      const code = errorCode(payload.error) || undefined;
      const i = runIndex(state.messages, runId);
      let messages: ChatMessage[];
      if (i >= 0) {
        messages = state.messages.slice();
        const cur = messages[i];
        if (cur.state === 'final') return markDone(state, runId);
        messages[i] = { ...cur, state: 'error', error: text, errorCode: code, thinking: false, chunks: undefined, baseSeq: undefined };
      } else {
        messages = sorted([
          ...state.messages,
          { ...streamingEntry(runId, payload, now), state: 'error', error: text, errorCode: code, thinking: false, chunks: undefined, baseSeq: undefined },
        ]);
      }
      return markDone({ ...state, messages }, runId);
    }
    default:
      return state;
  }
}

/**
 * Merges a history page: by message id, no duplicates; a persisted reply replaces its run's local
 * entry and takes its stored state (final, cancelled, interrupted or error: the store is the truth,
 * whatever the live view last showed); a user message replaces its unacknowledged local copy of the
 * same run. Then re-attaches to the runs still in progress (see attachRuns) and ends the `known`
 * runs the server has forgotten (see endVanished).
 */
export function mergeHistory(state: ChatState, page: WireMessage[], active: WireActiveRun[] = [], known: string[] = []): ChatState {
  let messages = state.messages.slice();
  let next = state;
  for (const m of page) {
    if (!isWireMessage(m)) continue;
    if (m.profileId && m.profileId !== state.profileId) continue;
    let ii = idIndex(messages, m.id, m.role === 'user' ? 'user' : 'assistant');
    if (ii < 0 && m.role === 'user' && m.runId) {
      ii = messages.findIndex((x) => x.role === 'user' && x.id === null && x.runId === m.runId);
    }
    if (ii >= 0) {
      messages[ii] = { ...fromWire(m), key: messages[ii].key };
      if (m.role === 'assistant' && m.runId) next = markDone(next, m.runId);
      continue;
    }
    if (m.role === 'assistant' && m.runId) {
      const ri = messages.findIndex((x) => x.role === 'assistant' && x.runId === m.runId && x.id === null);
      next = markDone(next, m.runId);
      if (ri >= 0) {
        messages[ri] = { ...fromWire(m), key: messages[ri].key };
        continue;
      }
    }
    messages.push(fromWire(m));
  }
  messages = sorted(messages);
  return endVanished(attachRuns({ ...next, messages }, active), active, known);
}

/**
 * Runs this client thought in progress: streaming replies and the active run. Pass them as the
 * history action's `known` when asking for history.
 */
export function runsInProgress(state: ChatState): string[] {
  const ids = new Set<string>();
  for (const m of state.messages) if (m.role === 'assistant' && m.state === 'streaming' && m.runId) ids.add(m.runId);
  if (state.activeRunId && !state.doneRuns.includes(state.activeRunId)) ids.add(state.activeRunId);
  return [...ids];
}

/**
 * Ends runs that the server has forgotten: known to be in progress when history was requested, yet
 * neither in `active` nor stored (e.g. the server was killed and restarted). Such a run can never
 * send a terminal event, so it is marked interrupted; a terminal event that still arrives (the run
 * ended, without a stored reply, just as history was read) sets its real state.
 */
function endVanished(state: ChatState, active: WireActiveRun[], known: string[]): ChatState {
  let next = state;
  for (const runId of known) {
    if (next.doneRuns.includes(runId) || active.some((a) => isActiveRun(a) && a.runId === runId)) continue;
    const i = runIndex(next.messages, runId);
    if (i >= 0 && next.messages[i].state === 'streaming') {
      const messages = next.messages.slice();
      messages[i] = { ...messages[i], state: 'interrupted', thinking: false, chunks: undefined, baseSeq: undefined };
      next = { ...next, messages };
    }
    next = markDone(next, runId);
  }
  return next;
}

function isActiveRun(a: unknown): a is WireActiveRun {
  const r = a as WireActiveRun;
  return !!r && typeof r === 'object' && typeof r.runId === 'string' && r.runId !== '' && typeof r.seq === 'number' &&
    typeof r.content === 'string';
}

/**
 * Re-attaches to runs in progress (history.profile `active`, SPEC §3): each becomes, or updates,
 * a streaming entry showing the snapshot's text (chunks 1..seq) followed by any chunks with a larger
 * seq that already arrived; chunks with seq ≤ the snapshot's are dropped as already included. Runs
 * that already ended here, or whose reply is already stored, are left alone. A run of this
 * client's session becomes the active (cancellable) run.
 */
function attachRuns(state: ChatState, active: WireActiveRun[]): ChatState {
  let messages = state.messages;
  let activeRunId = state.activeRunId;
  for (const a of active) {
    if (!isActiveRun(a)) continue;
    if (a.profileId && a.profileId !== state.profileId) continue;
    if (state.doneRuns.includes(a.runId)) continue;
    if (a.messageId && idIndex(messages, a.messageId, 'assistant') >= 0) continue;
    const i = runIndex(messages, a.runId);
    const cur = i >= 0 ? messages[i] : null;
    if (cur && cur.state !== 'streaming') continue;
    if (cur && cur.baseSeq !== undefined && a.seq <= cur.baseSeq) continue; // an older snapshot
    const later = (cur?.chunks ?? []).filter(([s]) => s > a.seq);
    const chunks: Array<[number, string]> = a.seq > 0 ? [[a.seq, a.content], ...later] : later;
    const content = joinChunks(chunks);
    // The reply will be stored with ts = startedAt (its question's ts) + 1.
    const entry: ChatMessage = {
      ...(cur ?? streamingEntry(a.runId, a, typeof a.startedAt === 'number' ? a.startedAt + 1 : 0)),
      chunks,
      content,
      baseSeq: a.seq,
      thinking: content === '',
    };
    messages = cur ? messages.map((m, k) => (k === i ? entry : m)) : sorted([...messages, entry]);
    if (state.sessionId && a.sessionId === state.sessionId && activeRunId !== a.runId) activeRunId = a.runId;
  }
  return messages === state.messages && activeRunId === state.activeRunId ? state : { ...state, messages, activeRunId };
}

export function reduceChat(state: ChatState, action: ChatAction): ChatState {
  switch (action.type) {
    case 'send': {
      const msg: ChatMessage = {
        key: action.key,
        id: null,
        role: 'user',
        content: action.content,
        ts: action.ts,
        state: 'final',
        sessionId: action.sessionId ?? undefined,
        pending: true,
      };
      return { ...state, messages: [...state.messages, msg] };
    }
    case 'sent': {
      const i = state.messages.findIndex((m) => m.key === action.key);
      let messages = state.messages;
      if (i >= 0) {
        messages = messages.slice();
        if (messages[i].id && action.userMessageId && messages[i].id !== action.userMessageId) {
          // chat.thinking named this copy with another run's identical question: give that one back.
          messages = unadopt(messages, i);
        }
        const dup = action.userMessageId ? idIndex(messages, action.userMessageId, 'user') : -1;
        if (dup >= 0 && dup !== i) {
          // History already brought the persisted copy: drop the local one.
          messages.splice(i, 1);
        } else {
          messages[i] = {
            ...messages[i],
            id: action.userMessageId ?? messages[i].id,
            runId: action.runId,
            sessionId: action.sessionId ?? messages[i].sessionId,
            pending: false,
          };
        }
      }
      const activeRunId = action.runId && !state.doneRuns.includes(action.runId) ? action.runId : state.activeRunId;
      return { ...state, messages, activeRunId, sessionId: action.sessionId ?? state.sessionId };
    }
    case 'send-failed': {
      const i = state.messages.findIndex((m) => m.key === action.key);
      if (i < 0) return state;
      // A copy that chat.thinking named after another run's identical question is that question.
      const messages = state.messages[i].id ? unadopt(state.messages.slice(), i) : state.messages.slice();
      messages[i] = { ...messages[i], state: 'error', error: action.error, errorCode: action.code, pending: false };
      return { ...state, messages };
    }
    case 'event':
      return onEvent(state, action.event, action.payload, action.now);
    case 'history': {
      const page = Array.isArray(action.messages) ? action.messages : [];
      const active = Array.isArray(action.active) ? action.active : [];
      const pruned = Array.isArray(action.present) ? pruneDeleted(state, page, active, action.present, !!action.hasOlder) : state;
      return mergeHistory(pruned, page, active, Array.isArray(action.known) ? action.known : []);
    }
    case 'cache':
      return mergeHistory(state, Array.isArray(action.messages) ? action.messages : []);
    case 'discard': {
      const messages = state.messages.filter((m) => m.key !== action.key || m.id !== null);
      return messages.length === state.messages.length ? state : { ...state, messages };
    }
    case 'deleted': {
      const messages = state.messages.filter((m) => m.id !== action.messageId);
      return messages.length === state.messages.length ? state : { ...state, messages };
    }
    case 'reset': {
      const r = action.reset;
      if (!r || typeof r.sessionId !== 'string' || r.sessionId === '') return state;
      if (r.profileId && r.profileId !== state.profileId) return state;
      const ours = action.own || (!!state.sessionId && r.closedSessionId === state.sessionId);
      if (!ours) return state;
      return { ...state, sessionId: r.sessionId, activeRunId: null, resetAt: action.now, reset: r };
    }
    case 'session':
      return state.sessionId || !action.sessionId ? state : { ...state, sessionId: action.sessionId };
  }
}

/**
 * Undoes a wrong match of mergeQuestion: entry i (a local copy) was named after a stored question
 * that turned out to be another run's. That question stays as its own entry; entry i becomes the
 * unnamed local copy again, at the same index and with the same key, so the caller can finish it.
 */
function unadopt(messages: ChatMessage[], i: number): ChatMessage[] {
  const cur = messages[i];
  const theirs: ChatMessage = { ...cur, key: cur.id as string, pending: false };
  messages[i] = { ...cur, id: null, runId: undefined };
  messages.splice(i + 1, 0, theirs); // same ts: its place in the order; entry i keeps its index
  return messages;
}

/**
 * Drops the messages the server no longer has: of `present` (stored messages this client held when
 * it asked for the page), those whose ts lies inside the page's range and that the page lacks. The
 * range is the whole timeline when the page has nothing older (`hasOlder` false), else the
 * timestamps above the page's oldest (a tie at the boundary may sit on the next page). A reply of a
 * run the page lists as active is kept (it is stored after the page was read).
 */
function pruneDeleted(state: ChatState, page: WireMessage[], active: WireActiveRun[], present: string[], hasOlder: boolean): ChatState {
  const onPage = new Set(page.filter(isWireMessage).map((m) => m.id));
  const running = new Set(active.filter(isActiveRun).map((a) => a.runId));
  const asked = new Set(present);
  let from = -Infinity;
  if (hasOlder) {
    const tss = page.filter(isWireMessage).map((m) => m.ts);
    if (tss.length === 0) return state;
    from = Math.min(...tss);
  }
  const messages = state.messages.filter(
    (m) =>
      !(m.id !== null && asked.has(m.id) && !onPage.has(m.id) && (hasOlder ? m.ts > from : m.ts >= from) &&
        !(m.runId && running.has(m.runId))),
  );
  return messages.length === state.messages.length ? state : { ...state, messages };
}

/** The ids of the stored messages this client holds (pass them as the history action's `present`). */
export function storedIds(state: ChatState): string[] {
  return state.messages.filter((m) => m.id !== null && m.state !== 'streaming' && !m.pending).map((m) => m.id as string);
}

/** How many stored messages the local cache keeps (the newest). */
export const CACHE_MESSAGES = 100;

/** The newest stored messages, as wire messages, for the local cache (localStorage). */
export function cacheEntries(state: ChatState, max = CACHE_MESSAGES): WireMessage[] {
  const out: WireMessage[] = [];
  for (const m of state.messages) {
    if (m.id === null || m.state === 'streaming' || m.pending) continue;
    const w: WireMessage = { id: m.id, profileId: state.profileId, role: m.role, content: m.content, ts: m.ts };
    if (m.sessionId) w.sessionId = m.sessionId;
    if (m.runId) w.runId = m.runId;
    if (m.sources) w.sources = m.sources;
    if (m.images) w.tools = [{ images: m.images }];
    if (m.state === 'cancelled') w.error = CANCELLED_MARK;
    else if (m.state === 'interrupted') w.error = INTERRUPTED_MARK;
    else if (m.state === 'error') w.error = m.error || 'failed';
    out.push(w);
  }
  return out.slice(-max);
}

/** Parses a cache written by cacheEntries; anything malformed yields []. */
export function parseCache(text: string | null): WireMessage[] {
  if (!text) return [];
  try {
    const v = JSON.parse(text);
    return Array.isArray(v) ? v.filter(isWireMessage) : [];
  } catch {
    return [];
  }
}

/** chat.send's `history` limits (backend/chat: MaxClientHistory, MaxClientHistoryMessageChars, MaxClientHistoryChars). */
export const HISTORY_MESSAGES = 20;
export const HISTORY_MESSAGE_CHARS = 16_000;
export const HISTORY_CHARS = 64_000;

export interface ClientHistoryMessage {
  id: string;
  role: Role;
  content: string;
  ts: number;
}

/**
 * The client's recent history for chat.send (SPEC §6 H_r): the newest stored messages with text,
 * oldest first, at most `max`, each cut to HISTORY_MESSAGE_CHARS and all within HISTORY_CHARS
 * characters (the oldest go first). Failed replies without text and unsent messages are left out,
 * and after a reset (state.reset) every message of another session than the current one.
 */
export function recentHistory(state: ChatState, max = HISTORY_MESSAGES): ClientHistoryMessage[] {
  const out: ClientHistoryMessage[] = [];
  let total = 0;
  for (let i = state.messages.length - 1; i >= 0 && out.length < max; i--) {
    const m = state.messages[i];
    if (m.id === null || m.state === 'streaming' || m.pending || m.content.trim() === '') continue;
    // After a reset only the new session's messages count (the server leaves the closed one's out too).
    if (state.reset && m.sessionId !== state.sessionId) continue;
    const content = [...m.content].slice(0, HISTORY_MESSAGE_CHARS).join('');
    const n = [...content].length;
    if (total + n > HISTORY_CHARS) break;
    total += n;
    out.push({ id: m.id, role: m.role, content, ts: m.ts });
  }
  return out.reverse();
}

/** True while the given run may still produce output. */
export function isRunActive(state: ChatState, runId: string | null): boolean {
  return !!runId && !state.doneRuns.includes(runId);
}

export function formatSource(s: Source): string {
  return `${s.path}:${s.startLine}-${s.endLine}`;
}

export const CHAT_EVENTS = ['chat.thinking', 'chat.chunk', 'chat.final', 'chat.cancelled', 'chat.error', 'message.deleted'] as const;

/**
 * Whether a failed chat.cancel is worth showing. NOT_FOUND means the run is no longer running
 * (it ended between the click and the server's check: chat.final/cancelled/error follows or
 * already came), so there is nothing to report; every other error is shown.
 */
export function cancelFailureShown(err: unknown): boolean {
  return errorCode(err) !== 'NOT_FOUND';
}
