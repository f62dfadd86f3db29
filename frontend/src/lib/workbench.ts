// The profiles workbench (SPEC §9, SPEC §6 "Profile = template + instances") as a pure reducer:
// the profiles of profiles.list, their running instances (profiles.instance events), what each
// profile is doing (a run streaming, waiting for the person's permission, the last run failed) and
// how many answers arrived while it was not the one in view (unread).
// Wire shapes: docs/PROTOCOL.md (profiles.list, InstanceStatus, chat.*, agent.*).
import { t } from './i18n.svelte';
import { errorText } from './util';

export type InstanceState = 'starting' | 'ready' | 'busy' | 'crashed' | 'hung' | 'restarting' | 'stopped';

/** InstanceStatus as profiles.list and profiles.instance send it. */
export interface InstanceStatus {
  instanceId: string;
  profileId: string;
  state: InstanceState | (string & {});
  reason?: string;
  restarts: number;
  pid?: number;
  violations?: number;
  /** Unix ms of the status. */
  ts: number;
}

export interface Profile {
  id: string;
  name: string;
  description?: string;
  model?: string;
  provider?: string;
  /** True for the profiles chat.send answers for (profiles.list `profiles`). */
  chat: boolean;
  /** Its config.md (profiles.list `index`), when it is a role profile. */
  path?: string;
  /** For a chat with one instance (its id as profileId): the instance's profile. */
  instanceOf?: string;
  /**
   * For an instance: false when no process runs it now (the app restarted, or it was stopped). A
   * send from the desktop starts it under the same id (docs/PROTOCOL.md "Chat on instances").
   */
  running?: boolean;
}

/** What a profile is doing, as the workbench shows it. */
export type Activity = 'idle' | 'streaming' | 'waiting' | 'error';

interface RunEntry {
  profileId: string;
  /** Open permission questions of the run (agent.permission ids). */
  asks: string[];
}

export interface WorkbenchState {
  profiles: Profile[];
  /** Instances by profile, then by k (the number after the last "-"). */
  instances: InstanceStatus[];
  /** Runs in progress by run id. */
  runs: Record<string, RunEntry>;
  /** The last run's error text by profile (cleared when the profile's next run starts). */
  errors: Record<string, string>;
  /** Answers that arrived while the profile was not in view, by profile. */
  unread: Record<string, number>;
  /** The profile in view. */
  selected: string;
  /** Runs whose answer was counted (a repeated chat.final counts once); bounded. */
  counted: string[];
}

const MAX_COUNTED = 500;

export function initialWorkbench(selected = 'main'): WorkbenchState {
  return { profiles: [], instances: [], runs: {}, errors: {}, unread: {}, selected, counted: [] };
}

/** profiles.list's payload (only the fields the workbench reads). */
export interface ProfilesListPayload {
  profiles?: Array<{ id?: unknown; name?: unknown; description?: unknown; model?: unknown; provider?: unknown }>;
  index?: Array<{ id?: unknown; name?: unknown; path?: unknown }>;
  instances?: unknown[];
}

export type WorkbenchAction =
  | { type: 'profiles'; payload: ProfilesListPayload }
  | { type: 'event'; event: string; payload: any }
  | { type: 'select'; profileId: string }
  /** agent.permissions' open questions (on connect): their runs wait for the person. */
  | { type: 'permissions'; requests: unknown[] }
  /**
   * A (re)connect: runs that ended while this client was away never send their end here, so the
   * runs in progress are forgotten; those still going show again with their next event.
   */
  | { type: 'connected' };

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

export function isInstanceStatus(v: unknown): v is InstanceStatus {
  const s = v as InstanceStatus;
  return !!s && typeof s === 'object' && typeof s.instanceId === 'string' && s.instanceId !== '' &&
    typeof s.profileId === 'string' && typeof s.state === 'string';
}

/** The k of instance "<profile>-<k>" (0 when it has none). */
function instanceK(s: InstanceStatus): number {
  const m = /-(\d+)$/.exec(s.instanceId);
  return m ? Number(m[1]) : 0;
}

function sortInstances(list: InstanceStatus[]): InstanceStatus[] {
  return list.slice().sort((a, b) => (a.profileId < b.profileId ? -1 : a.profileId > b.profileId ? 1 : instanceK(a) - instanceK(b)));
}

function normInstance(s: InstanceStatus): InstanceStatus {
  return { ...s, restarts: typeof s.restarts === 'number' ? s.restarts : 0, ts: typeof s.ts === 'number' ? s.ts : 0 };
}

/** Puts a status in place of the instance's older one (an older status than the one held is ignored). */
export function upsertInstance(list: InstanceStatus[], s: InstanceStatus): InstanceStatus[] {
  const st = normInstance(s);
  const i = list.findIndex((x) => x.instanceId === st.instanceId);
  if (i >= 0) {
    if (list[i].ts > st.ts) return list;
    const next = list.slice();
    next[i] = st;
    return sortInstances(next);
  }
  return sortInstances([...list, st]);
}

/**
 * The profiles of a profiles.list answer: the chat profiles first (in their order), then the role
 * profiles of the light index not already listed.
 */
export function mergeProfiles(payload: ProfilesListPayload): Profile[] {
  const out: Profile[] = [];
  const seen = new Map<string, number>();
  for (const p of Array.isArray(payload.profiles) ? payload.profiles : []) {
    const id = str(p?.id);
    if (!id || seen.has(id)) continue;
    seen.set(id, out.length);
    out.push({ id, name: str(p.name) ?? id, description: str(p.description), model: str(p.model), provider: str(p.provider), chat: true });
  }
  for (const e of Array.isArray(payload.index) ? payload.index : []) {
    const id = str(e?.id);
    if (!id) continue;
    const at = seen.get(id);
    if (at !== undefined) {
      out[at] = { ...out[at], path: str(e.path) };
      continue;
    }
    seen.set(id, out.length);
    out.push({ id, name: str(e.name) ?? id, path: str(e.path), chat: false });
  }
  return out;
}

function runOf(state: WorkbenchState, runId: string, profileId: string): WorkbenchState {
  if (state.runs[runId]) return state;
  const errors = { ...state.errors };
  delete errors[profileId];
  return { ...state, runs: { ...state.runs, [runId]: { profileId, asks: [] } }, errors };
}

function endRun(state: WorkbenchState, runId: string): WorkbenchState {
  if (!state.runs[runId]) return state;
  const runs = { ...state.runs };
  delete runs[runId];
  return { ...state, runs };
}

function ask(state: WorkbenchState, r: any): WorkbenchState {
  const id = str(r?.id);
  const runId = str(r?.runId);
  const profileId = str(r?.profileId);
  if (!id || !runId || !profileId) return state;
  const next = runOf(state, runId, profileId);
  const run = next.runs[runId];
  if (run.asks.includes(id)) return next;
  return { ...next, runs: { ...next.runs, [runId]: { ...run, asks: [...run.asks, id] } } };
}

function answered(state: WorkbenchState, id: string): WorkbenchState {
  let runs: Record<string, RunEntry> | null = null;
  for (const [runId, run] of Object.entries(state.runs)) {
    if (!run.asks.includes(id)) continue;
    runs ??= { ...state.runs };
    runs[runId] = { ...run, asks: run.asks.filter((a) => a !== id) };
  }
  return runs ? { ...state, runs } : state;
}

/** Run events that mean the run is (still) in progress. */
const RUN_EVENTS = new Set(['chat.thinking', 'chat.chunk', 'chat.reasoning', 'chat.tool', 'agent.state']);
/** agent.state targets after which the run produces nothing more. */
const FINAL_AGENT_STATES = new Set(['idle', 'failed', 'cancelled']);

function onEvent(state: WorkbenchState, event: string, p: any): WorkbenchState {
  if (!p || typeof p !== 'object') return state;
  if (event === 'profiles.instance') {
    if (!isInstanceStatus(p)) return state;
    const instances = upsertInstance(state.instances, p);
    return instances === state.instances ? state : { ...state, instances };
  }
  if (event === 'agent.permission') return ask(state, p);
  if (event === 'agent.permission.answered') return str(p.id) ? answered(state, p.id) : state;
  const runId = str(p.runId);
  const profileId = str(p.profileId);
  if (!runId || !profileId) return state;
  if (RUN_EVENTS.has(event)) {
    if (event === 'agent.state' && FINAL_AGENT_STATES.has(p.to)) return state; // the chat.* terminal event ends it
    if (state.counted.includes(runId)) return state; // a late event of a run that already ended
    return runOf(state, runId, profileId);
  }
  switch (event) {
    case 'chat.final': {
      let next = endRun(state, runId);
      if (next.counted.includes(runId)) return next;
      next = { ...next, counted: [...next.counted, runId].slice(-MAX_COUNTED) };
      if (profileId !== next.selected) next = { ...next, unread: { ...next.unread, [profileId]: (next.unread[profileId] ?? 0) + 1 } };
      return next;
    }
    case 'chat.cancelled': {
      const next = endRun(state, runId);
      return next.counted.includes(runId) ? next : { ...next, counted: [...next.counted, runId].slice(-MAX_COUNTED) };
    }
    case 'chat.error': {
      const next = endRun(state, runId);
      const counted = next.counted.includes(runId) ? next.counted : [...next.counted, runId].slice(-MAX_COUNTED);
      return { ...next, counted, errors: { ...next.errors, [profileId]: errorText(p.error) || 'the run failed' } };
    }
  }
  return state;
}

export function reduceWorkbench(state: WorkbenchState, action: WorkbenchAction): WorkbenchState {
  switch (action.type) {
    case 'profiles': {
      const profiles = mergeProfiles(action.payload ?? {});
      // The list is a snapshot; a status event newer than it wins.
      let instances: InstanceStatus[] = [];
      for (const s of Array.isArray(action.payload?.instances) ? action.payload.instances : []) {
        if (!isInstanceStatus(s)) continue;
        const held = state.instances.find((x) => x.instanceId === s.instanceId);
        instances = upsertInstance(instances, held && held.ts > (s.ts ?? 0) ? held : s);
      }
      return { ...state, profiles, instances };
    }
    case 'event':
      return onEvent(state, action.event, action.payload);
    case 'select': {
      if (state.selected === action.profileId && !state.unread[action.profileId]) return state;
      const unread = { ...state.unread };
      delete unread[action.profileId];
      return { ...state, selected: action.profileId, unread };
    }
    case 'connected':
      return Object.keys(state.runs).length === 0 ? state : { ...state, runs: {} };
    case 'permissions': {
      let next = state;
      for (const r of Array.isArray(action.requests) ? action.requests : []) next = ask(next, r);
      return next;
    }
  }
}

/** What the profile is doing: waiting for permission, else streaming, else its last run failed, else idle. */
export function activity(state: WorkbenchState, profileId: string): Activity {
  let streaming = false;
  for (const run of Object.values(state.runs)) {
    if (run.profileId !== profileId) continue;
    if (run.asks.length > 0) return 'waiting';
    streaming = true;
  }
  if (streaming) return 'streaming';
  return state.errors[profileId] !== undefined ? 'error' : 'idle';
}

/**
 * What a chat view with this id talks to: a profile of the list, else an instance (chat.send with
 * an instance id as profileId runs in that worker; its history is kept under the instance id), else
 * null (not known yet).
 */
export function chatTarget(state: WorkbenchState, id: string): Profile | null {
  const p = state.profiles.find((x) => x.id === id);
  if (p) return p;
  const s = state.instances.find((x) => x.instanceId === id);
  if (s) return { id, name: id, chat: true, instanceOf: s.profileId, running: s.state !== 'stopped' };
  const of = instanceProfile(state, id);
  return of ? { id, name: id, chat: true, instanceOf: of, running: false } : null;
}

/** The role profile whose instance id ("<profile>-<k>", k ≥ 1) id is, when that profile is listed. */
export function instanceProfile(state: WorkbenchState, id: string): string | undefined {
  const m = /^(.+)-([1-9]\d*)$/.exec(id);
  if (!m) return undefined;
  return state.profiles.some((p) => p.id === m[1] && p.path) ? m[1] : undefined;
}

/**
 * After a profiles.list: the id to select instead of the one in view when that one is gone (a
 * profile deleted, a stale id kept in localStorage), or null when it is fine. An instance that no
 * longer runs (the app restarted) stays selected: a send starts it again. The replacement is main,
 * else the first profile.
 */
export function reconcileSelection(state: WorkbenchState): string | null {
  if (state.profiles.length === 0) return null; // not loaded (or nothing to choose from)
  if (chatTarget(state, state.selected)) return null;
  const next = state.profiles.some((p) => p.id === 'main') ? 'main' : state.profiles[0].id;
  return next === state.selected ? null : next;
}

/** The profile's instances (in k order). */
export function instancesOf(state: WorkbenchState, profileId: string): InstanceStatus[] {
  return state.instances.filter((s) => s.profileId === profileId);
}

/** Unread answers of every profile but the one in view (for the tab title). */
export function totalUnread(state: WorkbenchState): number {
  return Object.entries(state.unread).reduce((n, [id, k]) => (id === state.selected ? n : n + k), 0);
}

/** What a profile is doing, in words (lib/messages.ts activity.*). */
export function activityLabel(a: Activity): string {
  return t(`activity.${a}`);
}

const INSTANCE_STATES: readonly string[] = ['starting', 'ready', 'busy', 'crashed', 'hung', 'restarting', 'stopped'] satisfies InstanceState[];

/** States in which an instance needs the person's attention. */
export function instanceTrouble(s: InstanceStatus): boolean {
  return s.state === 'crashed' || s.state === 'hung' || s.state === 'restarting';
}

export function instanceLabel(s: InstanceStatus): string {
  return INSTANCE_STATES.includes(s.state) ? t(`instance.${s.state as InstanceState}`) : s.state;
}

/** Events the workbench reduces. */
export const WORKBENCH_EVENTS = [
  'profiles.instance',
  'chat.thinking',
  'chat.chunk',
  'chat.reasoning',
  'chat.tool',
  'agent.state',
  'chat.final',
  'chat.cancelled',
  'chat.error',
  'agent.permission',
  'agent.permission.answered',
] as const;
