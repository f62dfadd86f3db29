// The Settings panel's data (SPEC §9): what config.get returns and how the panel's forms become
// config.patch merge patches. An API key is only ever sent, never read: the server answers with
// `apiKeySet` in its place. Network code stays in gateway.ts; this module is pure.

export interface ModelBlock {
  provider?: string;
  baseUrl?: string;
  model?: string;
  contextWindow?: number;
  apiKeySet?: boolean;
}

export interface EmbeddingBlock {
  provider?: string;
  model?: string;
  baseUrl?: string;
  dims?: number;
  apiKeySet?: boolean;
}

export interface ConfigShape {
  model?: ModelBlock;
  profiles?: Record<string, { model?: ModelBlock }>;
  gateway?: { port?: number; bind?: string };
  memory?: { embedding?: EmbeddingBlock };
  agents?: { exec?: { approval?: string; allowlist?: string[] } };
}

export interface SettingsView {
  path: string;
  config: ConfigShape;
  model: { provider: string; model: string; baseUrl: string; reason: string };
  gateway: { addr: string };
  embedding: { provider: string; model: string; dims: number; files: number; chunks: number };
  restartRequired: string[] | null;
}

export interface LocalServer {
  name: string;
  provider: string;
  baseUrl: string;
  models: string[];
}

export interface TestResult {
  ok: boolean;
  provider: string;
  model: string;
  answer?: string;
  error?: string;
  ms?: number;
}

export const PROVIDERS = [
  { value: '', label: 'Auto-detect · 自动检测' },
  { value: 'openai', label: 'OpenAI-compatible · OpenAI 兼容' },
  { value: 'ollama', label: 'Ollama' },
  { value: 'anthropic', label: 'Anthropic' },
  { value: 'offline', label: 'Offline (memory only) · 离线' },
];

export const EMBEDDING_PROVIDERS = [
  { value: '', label: 'Built-in (offline) · 内置' },
  { value: 'ollama', label: 'Ollama' },
  { value: 'openai', label: 'OpenAI-compatible · OpenAI 兼容' },
];

export const APPROVALS = [
  { value: 'ask', label: 'Ask every time · 每次询问' },
  { value: 'allowlist', label: 'Allowlist only · 仅允许列表' },
  { value: 'deny', label: 'Never run programs · 禁止' },
  { value: 'full', label: 'Run anything · 全部允许' },
];

/** The model form: what the person typed. `apiKey` is empty unless a new key was typed. */
export interface ModelForm {
  provider: string;
  baseUrl: string;
  model: string;
  apiKey: string;
  clearKey: boolean;
}

export function modelForm(b: ModelBlock | undefined): ModelForm {
  return { provider: b?.provider ?? '', baseUrl: b?.baseUrl ?? '', model: b?.model ?? '', apiKey: '', clearKey: false };
}

/** The merge patch of one model block: empty fields are removed (null), a typed key is set, a cleared key removed. */
export function modelPatch(f: ModelForm): Record<string, unknown> {
  const p: Record<string, unknown> = {
    provider: f.provider.trim() || null,
    baseUrl: f.baseUrl.trim() || null,
    model: f.model.trim() || null,
  };
  if (f.apiKey.trim()) p.apiKey = f.apiKey.trim();
  else if (f.clearKey) p.apiKey = null;
  return p;
}

/** The fields config.models / config.test take for a form (the key only when one was typed). */
export function modelRequest(f: ModelForm, profile = ''): Record<string, unknown> {
  const r: Record<string, unknown> = { provider: f.provider.trim(), baseUrl: f.baseUrl.trim(), model: f.model.trim() };
  if (f.apiKey.trim()) r.apiKey = f.apiKey.trim();
  if (profile) r.profile = profile;
  return r;
}

/** One glob per line; blank lines dropped. */
export function parseAllowlist(text: string): string[] {
  return text
    .split('\n')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** What changing the embedding provider costs, in words. */
export function reindexCost(files: number, chunks: number): string {
  return `Changing it re-indexes all ${files} files (${chunks} chunks) at the next start; the header shows the progress. · 更改后下次启动将重建索引（${files} 个文件，${chunks} 个片段），进度显示在顶部。`;
}

const RESTART_LABELS: Record<string, string> = {
  gateway: 'gateway port/bind · 网关',
  'memory.embedding': 'embedding provider · 嵌入模型',
  'memory.search': 'search ranking · 搜索排序',
};

export function restartText(keys: string[] | null | undefined): string {
  if (!keys || keys.length === 0) return '';
  return `Takes effect after a restart · 重启后生效: ${keys.map((k) => RESTART_LABELS[k] ?? k).join(', ')}`;
}
