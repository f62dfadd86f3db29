// Creating a role in the Profiles panel (issue 24 item 1; SPEC §5.2 cold start, docs/PROTOCOL.md
// profiles.create): the templates offered and the checks made before asking the gateway, which
// checks again (acl.ValidateRole).
import type { MessageKey } from './messages';
import type { GatewayClient } from './gateway';
import { t } from './i18n.svelte';

export interface RoleTemplate {
  id: string;
  label: MessageKey;
  name: string;
  persona: string;
  personaZh: string;
  capabilities: string[];
}

/** The starting points of a new role ("blank": from scratch). */
export const ROLE_TEMPLATES: RoleTemplate[] = [
  { id: 'blank', label: 'profiles.templateBlank', name: '', persona: '', personaZh: '', capabilities: [] },
  {
    id: 'coder',
    label: 'profiles.templateCoder',
    name: 'code-expert',
    persona: 'Reviews code, fixes bugs and tunes databases and servers.',
    personaZh: '审查代码，修复缺陷，调优数据库和服务器。',
    capabilities: ['code', 'debug', 'database', '代码', '调试'],
  },
  {
    id: 'writer',
    label: 'profiles.templateWriter',
    name: 'writer',
    persona: 'Drafts blog posts, tutorials and release notes in a clear style.',
    personaZh: '撰写博客、教程和发布说明，文风清晰。',
    capabilities: ['write', 'blog', 'docs', '写作', '文档'],
  },
  {
    id: 'analyst',
    label: 'profiles.templateAnalyst',
    name: 'analyst',
    persona: 'Studies metrics, builds dashboards and forecasts trends.',
    personaZh: '研究指标，制作仪表盘，预测趋势。',
    capabilities: ['data', 'metrics', 'report', '数据', '分析'],
  },
];

const RESERVED = new Set(['admin', 'all', 'authenticated', '*']);

/** Why a role name would be refused (the gateway's rules, docs/PROTOCOL.md cold start), or null. */
export function roleNameProblem(name: string): string | null {
  if (RESERVED.has(name.toLowerCase())) return t('profiles.nameReserved', { name });
  if (/[\s/\\*]/.test(name) || name.startsWith('.') || name.startsWith('$')) return t('profiles.nameHint');
  return null;
}

/** Capabilities from the comma-separated field (，、 too), trimmed, without empties or repeats. */
export function splitCapabilities(text: string): string[] {
  const out: string[] = [];
  for (const c of text.split(/[,，、]/)) {
    const v = c.trim();
    if (v && !out.includes(v)) out.push(v);
  }
  return out;
}

// ---- editing and deleting a role (profiles.update, profiles.delete; docs/PROTOCOL.md "Editing and
// deleting roles") ----

type Req = Pick<GatewayClient, 'request'>;

/** What the edit form starts from: the role's description and capabilities (roles.list), its model (config.get). */
export interface RoleSettings {
  role: string;
  description: string;
  capabilities: string[];
  model: string;
}

/** Reads a role's settings for the edit form; the model is "" when config.get is not callable or has none. */
export async function loadRoleSettings(gw: Req, role: string): Promise<RoleSettings> {
  const res = await gw.request<{ roles?: { role: string; description?: string; capabilities?: string[] }[] }>('roles.list', {});
  const r = (res.roles ?? []).find((x) => x.role === role);
  let model = '';
  try {
    const cfg = await gw.request<{ config?: { profiles?: Record<string, { model?: { model?: string } }> } }>('config.get', {});
    model = cfg.config?.profiles?.[role]?.model?.model ?? '';
  } catch {
    // A connection that may not read the settings edits without the model.
  }
  return { role, description: r?.description ?? '', capabilities: r?.capabilities ?? [], model };
}

/** profiles.update's answer. */
export interface UpdateResult {
  changed: string[];
  instances: string[];
  restartRequired: string[];
  restarted: string[];
}

/** Saves the edit form: only what differs from `before` is sent. */
export async function updateRole(gw: Req, before: RoleSettings, after: Omit<RoleSettings, 'role'>): Promise<UpdateResult> {
  const params: Record<string, unknown> = { role: before.role };
  if (after.description.trim() !== before.description) params.description = after.description.trim();
  if (after.capabilities.join('\u0000') !== before.capabilities.join('\u0000')) params.capabilities = after.capabilities;
  if (after.model.trim() !== before.model) params.model = after.model.trim();
  return normalizeUpdate(await gw.request('profiles.update', params, { timeoutMs: 60_000 }));
}

/** Restarts the role's running instances (after a model change). */
export async function restartRole(gw: Req, role: string): Promise<UpdateResult> {
  return normalizeUpdate(await gw.request('profiles.update', { role, restart: true }, { timeoutMs: 120_000 }));
}

function normalizeUpdate(r: unknown): UpdateResult {
  const o = (r ?? {}) as Partial<UpdateResult>;
  const arr = (v: unknown) => (Array.isArray(v) ? (v as string[]) : []);
  return { changed: arr(o.changed), instances: arr(o.instances), restartRequired: arr(o.restartRequired), restarted: arr(o.restarted) };
}

/** profiles.delete's answer (dryRun: what would be done). */
export interface DeletePlan {
  role: string;
  path: string;
  files: number;
  notes: number;
  kept: boolean;
  archivePath: string;
  instances: string[];
  mcpTokensRevoked: string[];
  orphanedDevices: { deviceId: string; displayName?: string }[];
}

/** profiles.delete: dryRun for the warning, then the deletion itself. */
export async function deleteRole(gw: Req, role: string, deleteMemory: boolean, dryRun: boolean): Promise<DeletePlan> {
  const r = await gw.request<Partial<DeletePlan>>('profiles.delete', { role, deleteMemory, dryRun }, { timeoutMs: 60_000 });
  return {
    role: r.role ?? role,
    path: r.path ?? `memory/roles/${role}`,
    files: r.files ?? 0,
    notes: r.notes ?? 0,
    kept: r.kept ?? !deleteMemory,
    archivePath: r.archivePath || `memory/archive/roles/${role}`,
    instances: r.instances ?? [],
    mcpTokensRevoked: r.mcpTokensRevoked ?? [],
    orphanedDevices: r.orphanedDevices ?? [],
  };
}
