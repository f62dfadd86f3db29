// Creating a role in the Profiles panel (issue 24 item 1; SPEC §5.2 cold start, docs/PROTOCOL.md
// profiles.create): the templates offered and the checks made before asking the gateway, which
// checks again (acl.ValidateRole).
import type { MessageKey } from './messages';
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
