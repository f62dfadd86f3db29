// The Settings panel's data (SPEC §9): what config.get returns and how the panel's forms become
// config.patch merge patches. An API key is only ever sent, never read: the server answers with
// `apiKeySet` in its place. Network code stays in gateway.ts; this module is pure.

import { lang, sentences, t, type Lang } from './i18n.svelte';
import type { MessageKey } from './messages';

export interface ModelBlock {
  provider?: string;
  baseUrl?: string;
  model?: string;
  contextWindow?: number;
  apiKeySet?: boolean;
  /** Whether the model takes images: the person's word (absent: what the server says, else unknown). */
  vision?: boolean;
}

/** Whether the model in use takes images, and where that was learnt (config.get's model). */
export type VisionSupport = 'yes' | 'no' | 'unknown';

export interface EmbeddingBlock {
  provider?: string;
  model?: string;
  baseUrl?: string;
  dims?: number;
  apiKeySet?: boolean;
}

/** config.json memory.search: the ranking options, and the rewrite of weak questions by the chat model
 *  (issue 25 item 5; off by default, timeout 4000 ms). */
export interface SearchBlock {
  vectorWeight?: number;
  mmr?: boolean;
  mmrLambda?: number;
  temporalDecay?: boolean;
  halfLifeDays?: number;
  rewrite?: boolean;
  rewriteTimeoutMs?: number;
}

/** config.get's rewrite: whether the running app rewrites weak questions and what it cost so far
 *  (memory.RewriteStats; latencies in ms, 0 before the first call). */
export interface RewriteInUse {
  on: boolean;
  calls: number;
  failures: number;
  lastMs: number;
  medianMs: number;
}

/** What the rewrite has cost, in words (Settings): nothing measured yet, or the median and last latency. */
export function rewriteLatencyText(r: RewriteInUse | undefined): string {
  if (!r || !r.on) return t('settings.rewrite.notRunning');
  if (r.calls === 0) return t('settings.rewrite.noCalls');
  return t('settings.rewrite.latency', { median: r.medianMs, last: r.lastMs, calls: r.calls, failures: r.failures });
}

export interface ConfigShape {
  model?: ModelBlock;
  profiles?: Record<string, { model?: ModelBlock }>;
  gateway?: { port?: number; bind?: string };
  memory?: { embedding?: EmbeddingBlock; search?: SearchBlock };
  agents?: {
    exec?: { approval?: string; allowlist?: string[] };
    heartbeat?: { enabled?: boolean; every?: string; activeHours?: { start?: string; end?: string } };
  };
  sessions?: { reset?: string; dailyAt?: string; idleMinutes?: number };
  talk?: TalkBlock;
}

/** config.json "talk" as config.get returns it (issue 27; docs/PROTOCOL.md "Talk"): keys as apiKeySet. */
export interface TalkBlock {
  stt?: { baseUrl?: string; model?: string; apiKeySet?: boolean; language?: 'auto' | 'ui' | string };
  tts?: {
    provider?: 'openai' | 'elevenlabs' | 'browser' | '' | string;
    baseUrl?: string;
    model?: string;
    voice?: string;
    speed?: number;
    format?: string;
    apiKeySet?: boolean;
    elevenlabs?: { voiceId?: string; modelId?: string; stability?: number };
  };
  interrupt?: 'cancel' | 'queue' | string;
  keepAudio?: boolean;
  continuous?: { silenceMs?: number; minSpeechMs?: number };
}

/** The Settings → Talk form: every field a string or flag as the inputs hold it. */
export interface TalkForm {
  sttBaseUrl: string;
  sttModel: string;
  sttKey: string;
  sttClearKey: boolean;
  sttLanguage: 'auto' | 'ui';
  ttsProvider: '' | 'openai' | 'elevenlabs' | 'browser';
  ttsBaseUrl: string;
  ttsModel: string;
  ttsVoice: string;
  ttsSpeed: string;
  ttsFormat: string;
  ttsKey: string;
  ttsClearKey: boolean;
  elVoiceId: string;
  elModelId: string;
  elStability: string;
  interrupt: 'cancel' | 'queue';
  keepAudio: boolean;
  silenceMs: string;
  minSpeechMs: string;
}

/** The form for config.get's talk block (defaults as docs/PROTOCOL.md "Talk" gives them). */
export function talkForm(b: TalkBlock | undefined): TalkForm {
  const stt = b?.stt ?? {};
  const tts = b?.tts ?? {};
  const el = tts.elevenlabs ?? {};
  const p = tts.provider;
  return {
    sttBaseUrl: stt.baseUrl ?? '',
    sttModel: stt.model ?? '',
    sttKey: '',
    sttClearKey: false,
    sttLanguage: stt.language === 'ui' ? 'ui' : 'auto',
    ttsProvider: p === 'openai' || p === 'elevenlabs' || p === 'browser' ? p : '',
    ttsBaseUrl: tts.baseUrl ?? '',
    ttsModel: tts.model ?? '',
    ttsVoice: tts.voice ?? '',
    ttsSpeed: typeof tts.speed === 'number' ? String(tts.speed) : '1',
    ttsFormat: tts.format ?? '',
    ttsKey: '',
    ttsClearKey: false,
    elVoiceId: el.voiceId ?? '',
    elModelId: el.modelId ?? '',
    elStability: typeof el.stability === 'number' ? String(el.stability) : '',
    interrupt: b?.interrupt === 'queue' ? 'queue' : 'cancel',
    keepAudio: b?.keepAudio === true,
    silenceMs: typeof b?.continuous?.silenceMs === 'number' ? String(b.continuous.silenceMs) : '',
    minSpeechMs: typeof b?.continuous?.minSpeechMs === 'number' ? String(b.continuous.minSpeechMs) : '',
  };
}

function numberIn(v: string, lo: number, hi: number): number | null | undefined {
  if (v.trim() === '') return null;
  const n = Number(v);
  return Number.isFinite(n) && n >= lo && n <= hi ? n : undefined;
}

/**
 * The config.patch "talk" merge patch for a form, or the message key of the first field out of bounds
 * (speed 0.5…2, stability 0…1, silenceMs 200…5000, minSpeechMs 50…5000 as backend/talk validates). Empty fields are null (the
 * default); a key is sent only when typed, null when "remove" is checked.
 */
export function talkPatch(f: TalkForm): { patch: Record<string, unknown> } | { error: MessageKey } {
  const speed = numberIn(f.ttsSpeed, 0.5, 2);
  if (speed === undefined) return { error: 'settings.talk.badSpeed' };
  const stability = numberIn(f.elStability, 0, 1);
  if (stability === undefined) return { error: 'settings.talk.badStability' };
  const silenceMs = numberIn(f.silenceMs, 200, 5000);
  const minSpeechMs = numberIn(f.minSpeechMs, 50, 5000);
  if (silenceMs === undefined || minSpeechMs === undefined) return { error: 'settings.talk.badVad' };
  const orNull = (s: string) => s.trim() || null;
  const stt: Record<string, unknown> = { baseUrl: orNull(f.sttBaseUrl), model: orNull(f.sttModel), language: f.sttLanguage };
  if (f.sttKey.trim()) stt.apiKey = f.sttKey.trim();
  else if (f.sttClearKey) stt.apiKey = null;
  const tts: Record<string, unknown> = {
    provider: f.ttsProvider,
    baseUrl: orNull(f.ttsBaseUrl),
    model: orNull(f.ttsModel),
    voice: orNull(f.ttsVoice),
    speed,
    format: orNull(f.ttsFormat),
    elevenlabs: { voiceId: orNull(f.elVoiceId), modelId: orNull(f.elModelId), stability },
  };
  if (f.ttsKey.trim()) tts.apiKey = f.ttsKey.trim();
  else if (f.ttsClearKey) tts.apiKey = null;
  return {
    patch: {
      stt,
      tts,
      interrupt: f.interrupt,
      keepAudio: f.keepAudio,
      continuous: { silenceMs, minSpeechMs },
    },
  };
}

/** Where the gateway listens now (config.get "gateway"): the plain 127.0.0.1 listener, the bind in
 *  force, the HTTPS/WSS listeners, the TLS certificate's fingerprint (hex SHA-256, words) and its
 *  public key's SPKI hash (base64), the gateway id, and the mDNS advertisement: its state, the
 *  interfaces it is on (or, when retrying, could not use) and why it is retrying. */
export interface GatewayInUse {
  addr: string;
  bind?: string;
  addresses?: string[];
  urls?: string[];
  tlsFingerprint?: string;
  tlsFingerprintWords?: string;
  tlsSpki?: string;
  gatewayId?: string;
  mdns?: string;
  mdnsInterfaces?: string[];
  mdnsReason?: string;
  mdnsError?: string;
}

export interface SettingsView {
  path: string;
  config: ConfigShape;
  model: { provider: string; model: string; baseUrl: string; reason: string; reasonCode?: string; vision?: VisionSupport; visionFrom?: string };
  gateway: GatewayInUse;
  embedding: { provider: string; model: string; dims: number; files: number; chunks: number };
  /** Main's heartbeat schedule in force (absent from an older gateway). */
  heartbeat?: HeartbeatInUse;
  /** The rewrite of weak questions in force and its measured latency (absent from an older gateway). */
  rewrite?: RewriteInUse;
  restartRequired: string[] | null;
}

/** config.get's heartbeat: the schedule in force (api.HeartbeatInUse). */
export interface HeartbeatInUse {
  on: boolean;
  auto: boolean;
  fileUsed: boolean;
  everyMinutes: number;
  start: string;
  end: string;
  lastRun?: number;
  lastOutcome?: 'silent' | 'shown' | 'failed' | string;
  next?: number;
}

/** The heartbeat form: mode auto (follow HEARTBEAT.md), on or off; every in minutes; active hours HH:MM. */
export interface HeartbeatForm {
  mode: 'auto' | 'on' | 'off';
  everyMinutes: string;
  start: string;
  end: string;
}

/** A heartbeat turn's outcome in the person's language. */
export function heartbeatOutcomeText(outcome: string | undefined): string {
  switch (outcome) {
    case 'silent':
      return t('settings.heartbeat.outcome.silent');
    case 'shown':
      return t('settings.heartbeat.outcome.shown');
    default:
      return t('settings.heartbeat.outcome.failed');
  }
}

export function heartbeatForm(c: ConfigShape['agents'] | undefined, inUse: HeartbeatInUse | undefined): HeartbeatForm {
  const h = c?.heartbeat ?? {};
  return {
    mode: h.enabled === true ? 'on' : h.enabled === false ? 'off' : 'auto',
    everyMinutes: String(inUse?.everyMinutes || 30),
    start: h.activeHours?.start ?? '',
    end: h.activeHours?.end ?? '',
  };
}

const CLOCK = /^([01]?\d|2[0-3]):[0-5]\d$|^24:00$/;

/** The agents.heartbeat patch of a form, or the message key of what is wrong with it. */
export function heartbeatPatch(f: HeartbeatForm): { patch: Record<string, unknown> } | { error: MessageKey } {
  const n = Number(f.everyMinutes.trim());
  if (!Number.isInteger(n) || n < 1 || n > 24 * 60) return { error: 'settings.heartbeat.badEvery' };
  const start = f.start.trim();
  const end = f.end.trim();
  if ((start && !CLOCK.test(start)) || (end && !CLOCK.test(end)) || (!start !== !end)) return { error: 'settings.heartbeat.badHours' };
  return {
    patch: {
      enabled: f.mode === 'auto' ? null : f.mode === 'on',
      every: `${n}m`,
      activeHours: { start: start || null, end: end || null },
    },
  };
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

/** A choice of a select: its value, and its text (a catalogue key, or a proper name as it is). */
export interface Option {
  value: string;
  key?: MessageKey;
  name?: string;
}

/** The text of an option in the UI's language. */
export function optionText(o: Option): string {
  return o.key ? t(o.key) : (o.name ?? o.value);
}

export const PROVIDERS: Option[] = [
  { value: '', key: 'settings.provider.auto' },
  { value: 'openai', key: 'settings.provider.openai' },
  { value: 'ollama', name: 'Ollama' },
  { value: 'anthropic', name: 'Anthropic' },
  { value: 'offline', key: 'settings.provider.offline' },
];

export const EMBEDDING_PROVIDERS: Option[] = [
  { value: '', key: 'settings.provider.builtin' },
  { value: 'ollama', name: 'Ollama' },
  { value: 'openai', key: 'settings.provider.openai' },
];

export const APPROVALS: Option[] = [
  { value: 'ask', key: 'settings.approval.ask' },
  { value: 'allowlist', key: 'settings.approval.allowlist' },
  { value: 'deny', key: 'settings.approval.deny' },
  { value: 'full', key: 'settings.approval.full' },
];

/** The model form: what the person typed. `apiKey` is empty unless a new key was typed. */
export interface ModelForm {
  provider: string;
  baseUrl: string;
  model: string;
  apiKey: string;
  clearKey: boolean;
  /** The vision override: '' = not set (the server decides), 'yes' or 'no'. Absent: left alone. */
  vision?: '' | 'yes' | 'no';
}

export function modelForm(b: ModelBlock | undefined): ModelForm {
  const vision = b?.vision === true ? 'yes' : b?.vision === false ? 'no' : '';
  return { provider: b?.provider ?? '', baseUrl: b?.baseUrl ?? '', model: b?.model ?? '', apiKey: '', clearKey: false, vision };
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
  if (f.vision !== undefined) p.vision = f.vision === 'yes' ? true : f.vision === 'no' ? false : null;
  return p;
}

/** The words for whether the model in use takes images (Settings), en and zh. */
export function visionText(m: SettingsView['model']): string {
  const v = m.vision ?? 'unknown';
  const what = t(v === 'yes' ? 'settings.vision.yes' : v === 'no' ? 'settings.vision.no' : 'settings.vision.unknown');
  const from = m.visionFrom === 'config' ? 'settings.vision.fromConfig' : m.visionFrom === 'server' ? 'settings.vision.fromServer' : '';
  return from ? `${what} (${t(from as MessageKey)})` : what;
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
  return t('settings.reindex', { files: t('common.files', { n: files }), chunks: t('common.chunks', { n: chunks }) });
}

const RESTART_LABELS: Record<string, MessageKey> = {
  gateway: 'settings.restart.gateway',
  'memory.embedding': 'settings.restart.embedding',
  'memory.search': 'settings.restart.search',
};

const MDNS_LABELS: Record<string, MessageKey> = {
  advertising: 'settings.mdns.advertising',
  retrying: 'settings.mdns.retrying',
  starting: 'settings.mdns.starting',
  stopped: 'settings.mdns.stopped',
};

/** Why the advertisement is retrying (config.get gateway.mdnsReason; backend discovery.Reason), with
 *  the interfaces concerned as {on}. "error" and unknown reasons keep the generic retrying text. */
const MDNS_REASONS: Record<string, MessageKey> = {
  'no-multicast': 'settings.mdns.noMulticast',
  'interface-down': 'settings.mdns.down',
  'no-interface': 'settings.mdns.noInterface',
};

/** The mDNS advertisement (config.get gateway.mdns, mdnsInterfaces, mdnsReason) in words —
 *  "advertising on eth0", "not possible on tun0: no multicast (phones must scan the QR code)";
 *  '' when there is none (loopback bind). */
export function mdnsText(g: Pick<GatewayInUse, 'mdns' | 'mdnsInterfaces' | 'mdnsReason'> | undefined): string {
  const state = g?.mdns;
  if (!state) return '';
  const on = (g.mdnsInterfaces ?? []).join(', ');
  if (state === 'advertising' && on) return t('settings.mdns.advertisingOn', { on });
  if (state === 'retrying' && g.mdnsReason && MDNS_REASONS[g.mdnsReason] && (on || g.mdnsReason === 'no-interface')) {
    return t(MDNS_REASONS[g.mdnsReason], { on });
  }
  return MDNS_LABELS[state] ? t(MDNS_LABELS[state]) : state;
}

export function restartText(keys: string[] | null | undefined): string {
  if (!keys || keys.length === 0) return '';
  return t('settings.restart', { what: keys.map((k) => (RESTART_LABELS[k] ? t(RESTART_LABELS[k]) : k)).join(', ') });
}

const REASONS: Record<string, MessageKey> = {
  'config-offline': 'settings.reason.config-offline',
  'config-ollama': 'settings.reason.config-ollama',
  'config-anthropic': 'settings.reason.config-anthropic',
  'config-openai': 'settings.reason.config-openai',
  'env-openai': 'settings.reason.env-openai',
  'env-anthropic': 'settings.reason.env-anthropic',
  'ollama-found': 'settings.reason.ollama-found',
  'ollama-empty': 'settings.reason.ollama-empty',
  none: 'settings.reason.none',
  failed: 'settings.reason.failed',
};

/**
 * Why the model in use was chosen, in the UI's language (issue 24 item 8): by the gateway's
 * reasonCode, the details from the model's own fields; a code this UI does not know (or an older
 * gateway without codes) shows the gateway's sentence as sent.
 */
export function modelReasonText(m: SettingsView['model']): string {
  const key = m.reasonCode ? REASONS[m.reasonCode] : undefined;
  if (!key) return m.reason;
  return t(key, { model: m.model || '–', url: m.baseUrl || '–' });
}

/**
 * talk.test's answer (docs/PROTOCOL.md "Talk"): ok or a failure's code (TALK_STT_FAILED,
 * TALK_TTS_FAILED), its why (backend/talk ServerError.Why: unreachable, status, read, too_large,
 * not_json, not_audio, request, empty, or slow), the URL asked, its HTTP status, what was asked (model)
 * and got (bytes of mimeType); detail is the gateway's English sentence of the same.
 */
export interface TalkTestResult {
  ok: boolean;
  latencyMs?: number;
  detail?: string;
  code?: string;
  status?: number;
  why?: string;
  url?: string;
  provider?: string;
  model?: string;
  bytes?: number;
  mimeType?: string;
  browser?: boolean;
}

const TALK_WHY: Record<string, MessageKey> = {
  unreachable: 'settings.talk.why.unreachable',
  status: 'settings.talk.why.status',
  read: 'settings.talk.why.read',
  too_large: 'settings.talk.why.tooLarge',
  not_json: 'settings.talk.why.notJson',
  not_audio: 'settings.talk.why.notAudio',
  empty: 'settings.talk.why.empty',
  slow: 'settings.talk.why.slow',
  request: 'settings.talk.why.other',
};

/**
 * Settings → Talk's words for a test's answer, in language l: worded here from its fields (the
 * gateway's detail is English); a gateway that sends no fields (an older one) has its detail shown.
 * A wrong key (HTTP 401, 403) and a wrong path (404) say what to check.
 */
export function talkTestText(kind: 'stt' | 'tts', r: TalkTestResult, l: Lang = lang()): string {
  const url = r.url ?? '';
  if (r.ok) {
    const ms = r.latencyMs ?? 0;
    if (r.browser) return `✓ ${t('settings.talk.testOkBrowser', undefined, l)}`;
    if (url && kind === 'stt') return `✓ ${t('settings.talk.testOkStt', { ms, url, model: r.model ?? '' }, l)}`;
    if (url) return `✓ ${t('settings.talk.testOkTts', { ms, url, bytes: r.bytes ?? 0, type: r.mimeType ?? '' }, l)}`;
    return `✓ ${sentences([t('settings.talk.testOk', { ms }, l), r.detail ?? ''], l)}`;
  }
  // A refusal (no server set, not allowed): the page's or the gateway's sentence alone.
  if (!r.code && !r.why) return `✗ ${r.detail ?? ''}`;
  const head = r.code === 'TALK_TTS_FAILED' || (!r.code && kind === 'tts') ? t('settings.talk.testTtsFailed', undefined, l) : t('settings.talk.testSttFailed', undefined, l);
  let why: MessageKey | undefined = r.why ? TALK_WHY[r.why] : undefined;
  if (r.why === 'status' && (r.status === 401 || r.status === 403)) why = 'settings.talk.why.key';
  else if (r.why === 'status' && r.status === 404) why = 'settings.talk.why.notFound';
  if (!why || !url) return `✗ ${sentences([head, r.detail ?? ''], l)}`;
  return `✗ ${sentences([head, t(why, { url, status: r.status ?? 0 }, l)], l)}`;
}
