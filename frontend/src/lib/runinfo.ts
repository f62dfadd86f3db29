// What a chat run did besides its answer text, by run id: the model's reasoning (chat.reasoning
// deltas, shown folded), its tool calls (chat.tool) and the agent loop's state (agent.state, SPEC §6
// "Agent loop as an explicit state machine"). Kept apart from the chat reducer (lib/chat.ts), which
// replaces a run's entry by the stored message when it ends: the stored message has none of this.
// Wire shapes: docs/PROTOCOL.md (chat.reasoning, chat.tool, agent.state).
import { t } from './i18n.svelte';

export type ToolStatus = 'running' | 'ok' | 'error' | 'denied' | 'accepted';

export interface ToolCall {
  callId: string;
  tool: string;
  argsSummary?: string;
  status: ToolStatus;
  /** The result's summary (what the model saw). */
  summary?: string;
}

export type AgentState = 'idle' | 'analyzing' | 'planning' | 'acting' | 'observing' | 'reporting' | 'failed' | 'cancelled';

export interface RunInfo {
  runId: string;
  /** Reasoning text so far (the deltas joined). */
  reasoning: string;
  tools: ToolCall[];
  /** The agent loop's current state, and since when (Unix ms). */
  agentState?: AgentState | (string & {});
  stateAt?: number;
  stateReason?: string;
  /** A terminal chat event arrived (final, cancelled, error). */
  ended: boolean;
}

export interface RunInfoState {
  profileId: string;
  runs: Record<string, RunInfo>;
  /** Run ids, oldest first (the oldest are dropped past MAX_RUNS). */
  order: string[];
}

export const MAX_RUNS = 200;

export function initialRunInfo(profileId: string): RunInfoState {
  return { profileId, runs: {}, order: [] };
}

const TERMINAL = new Set(['chat.final', 'chat.cancelled', 'chat.error']);
const TOOL_STATUSES = new Set<ToolStatus>(['ok', 'error', 'denied', 'accepted']);

function withRun(state: RunInfoState, runId: string, f: (r: RunInfo) => RunInfo): RunInfoState {
  const cur = state.runs[runId];
  const next = f(cur ?? { runId, reasoning: '', tools: [], ended: false });
  if (next === cur) return state;
  let order = cur ? state.order : [...state.order, runId];
  const runs = { ...state.runs, [runId]: next };
  while (order.length > MAX_RUNS) {
    delete runs[order[0]];
    order = order.slice(1);
  }
  return { ...state, runs, order };
}

function toolEvent(r: RunInfo, p: any): RunInfo {
  const callId = typeof p.callId === 'string' && p.callId ? p.callId : '';
  if (!callId) return r;
  const i = r.tools.findIndex((t) => t.callId === callId);
  const cur: ToolCall = i >= 0 ? r.tools[i] : { callId, tool: typeof p.tool === 'string' ? p.tool : '?', status: 'running' };
  const t: ToolCall = { ...cur };
  if (typeof p.tool === 'string' && p.tool) t.tool = p.tool;
  if (typeof p.argsSummary === 'string' && p.argsSummary) t.argsSummary = p.argsSummary;
  if (p.phase === 'result') {
    t.status = TOOL_STATUSES.has(p.status) ? p.status : 'ok';
    if (typeof p.summary === 'string') t.summary = p.summary;
  } else if (i >= 0) {
    return r; // a repeated call event; the result may already be in
  }
  const tools = r.tools.slice();
  if (i >= 0) tools[i] = t;
  else tools.push(t);
  return { ...r, tools };
}

/** Reduces one gateway event; events of other profiles and without a run id are ignored. */
export function reduceRunInfo(state: RunInfoState, event: string, p: any): RunInfoState {
  if (!p || typeof p !== 'object') return state;
  if (typeof p.profileId === 'string' && p.profileId !== state.profileId) return state;
  const runId = typeof p.runId === 'string' && p.runId ? p.runId : '';
  if (!runId) return state;
  switch (event) {
    case 'chat.reasoning':
      if (typeof p.delta !== 'string' || p.delta === '') return state;
      return withRun(state, runId, (r) => ({ ...r, reasoning: r.reasoning + p.delta }));
    case 'chat.tool':
      return withRun(state, runId, (r) => toolEvent(r, p));
    case 'agent.state': {
      if (typeof p.to !== 'string' || !p.to) return state;
      const at = typeof p.at === 'number' ? p.at : 0;
      return withRun(state, runId, (r) =>
        r.stateAt !== undefined && at < r.stateAt
          ? r // an older transition arriving late
          : { ...r, agentState: p.to, stateAt: at, stateReason: typeof p.reason === 'string' && p.reason ? p.reason : undefined },
      );
    }
    default:
      if (!TERMINAL.has(event) || !state.runs[runId]) return state;
      return withRun(state, runId, (r) => (r.ended ? r : { ...r, ended: true }));
  }
}

/** The agent states shown while a run is active, in words (lib/messages.ts agent.*). */
const AGENT_STATES: readonly string[] = ['idle', 'analyzing', 'planning', 'acting', 'observing', 'reporting', 'failed', 'cancelled'] satisfies AgentState[];

export function agentStateLabel(s: string | undefined): string {
  if (!s) return '';
  return AGENT_STATES.includes(s) ? t(`agent.${s as AgentState}`) : s;
}

/** A tool call's status in words (lib/messages.ts tool.*). */
export function toolStatusLabel(s: ToolStatus): string {
  return t(`tool.${s}`);
}

/** The status line of an active run: the agent state and the tool running, if any. */
export function statusLine(r: RunInfo | undefined): string {
  if (!r || r.ended || !r.agentState) return '';
  const label = agentStateLabel(r.agentState);
  const running = r.tools.filter((t) => t.status === 'running').map((t) => t.tool);
  return running.length > 0 ? `${label}: ${running.join(', ')}` : label;
}

/** Events reduceRunInfo reads. */
export const RUNINFO_EVENTS = ['chat.reasoning', 'chat.tool', 'agent.state', 'chat.final', 'chat.cancelled', 'chat.error'] as const;
