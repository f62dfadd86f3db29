// Validation of A2UI lines against the official JSON schemas as shipped by @a2ui/web_core
// (the committed copy in ./schemas, refreshed by `npm run a2ui-schemas`; the Go gateway embeds
// the same files). The checks run as code generated from those files (validators.generated.js,
// see codegen.js): the app's CSP allows no eval, which ajv's runtime compiler needs. The contract is docs/PROTOCOL.md "Canvas and A2UI":
//   - a line's version comes from its shape: a v0.9 line carries "version": "v0.9"; a v0.8 line
//     is an object whose one key is surfaceUpdate, beginRendering, dataModelUpdate or deleteSurface;
//     anything else is refused "unknown A2UI version".
//   - v0.8 lines are checked against v0_8/server_to_client_with_standard_catalog.json, v0.9 lines
//     against v0_9/server_to_client.json with the basic catalogue (catalogs/basic/catalog.json,
//     which the schema reaches as the relative "catalog.json").
//   - a JSONL text stops at its first invalid line: the lines before it stand (validateJsonl).
import * as generated from './validators.generated.js';
import v09Basic from './schemas/v0_9/catalogs/basic/catalog.json';

export type A2uiVersion = 'v0.8' | 'v0.9';

/** One A2UI message (one JSONL line), already parsed. */
export type A2uiMessage = Record<string, unknown>;

export type Validation = { ok: true; version: A2uiVersion; message: A2uiMessage } | { ok: false; reason: string };

/** An invalid line: line is 1-based within the text or batch it came from. */
export interface LineError {
  line: number;
  reason: string;
}

/** The v0.8 message kinds (exactly one per line). */
export const V08_KINDS = ['beginRendering', 'surfaceUpdate', 'dataModelUpdate', 'deleteSurface'] as const;
/** The v0.9 message kinds (exactly one per line, beside "version"). */
export const V09_KINDS = ['createSurface', 'updateComponents', 'updateDataModel', 'deleteSurface'] as const;

/** The start of the reason for a line whose version cannot be told from its shape. */
export const UNKNOWN_VERSION = 'unknown A2UI version';

/** The whole reason for such a line: what it holds, and what a known line looks like. */
export function unknownVersionReason(msg: unknown): string {
  const holds = isObject(msg)
    ? 'version' in msg
      ? `"version": ${JSON.stringify(msg.version)?.slice(0, 40)}`
      : `keys ${Object.keys(msg).slice(0, 5).map((k) => JSON.stringify(k.slice(0, 40))).join(', ') || 'none'}`
    : Array.isArray(msg)
      ? 'an array'
      : `a ${msg === null ? 'null' : typeof msg}`;
  return `${UNKNOWN_VERSION} (the line holds ${holds}): a v0.9 line carries "version": "v0.9", a v0.8 line is one of {surfaceUpdate|beginRendering|dataModelUpdate|deleteSurface: …}`;
}

/** Most lines in one JSONL text (validateJsonl refuses the rest with a reason). */
export const MAX_LINES = 10_000;


function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The version of a parsed line from its shape, or null when it is neither. */
export function detectVersion(msg: unknown): A2uiVersion | null {
  if (!isObject(msg)) return null;
  if ('version' in msg) return msg.version === 'v0.9' ? 'v0.9' : null;
  const keys = Object.keys(msg);
  if (keys.length >= 1 && keys.every((k) => (V08_KINDS as readonly string[]).includes(k))) return 'v0.8';
  return null;
}

/** The kind of a valid message (its one action key). */
export function messageKind(msg: A2uiMessage): string {
  return Object.keys(msg).find((k) => k !== 'version') ?? '';
}

function describe(errors: ErrorObject[] | null | undefined): string {
  if (!errors || errors.length === 0) return 'does not match the schema';
  // The deepest error says most; oneOf/anyOf summaries come last in ajv's list.
  const best = [...errors].sort((a, b) => b.instancePath.length - a.instancePath.length || rank(a) - rank(b))[0];
  const where = best.instancePath || '/';
  let what = best.message ?? 'is invalid';
  if (best.keyword === 'additionalProperties' || best.keyword === 'unevaluatedProperties') {
    const p = best.params as { additionalProperty?: string; unevaluatedProperty?: string };
    what = `has unknown property "${p.additionalProperty ?? p.unevaluatedProperty}"`;
  } else if (best.keyword === 'enum') {
    what = `must be one of ${JSON.stringify((best.params as { allowedValues?: unknown[] }).allowedValues ?? [])}`;
  } else if (best.keyword === 'const') {
    what = `must be ${JSON.stringify((best.params as { allowedValue?: unknown }).allowedValue)}`;
  }
  return `${where} ${what}`;
}

function rank(e: ErrorObject): number {
  // Prefer concrete failures over the summaries of combinators.
  return e.keyword === 'oneOf' || e.keyword === 'anyOf' || e.keyword === 'if' ? 1 : 0;
}

/** A validator over the shipped schemas; compile once and reuse (compiling takes tens of ms). */
export interface Validator {
  /** Validates one line: a JSON text or an already parsed value. */
  validate(line: string | unknown): Validation;
  /** Validates a JSONL text line by line (blank lines skipped), stopping at the first invalid line. */
  validateJsonl(text: string): { messages: Array<{ line: number; version: A2uiVersion; message: A2uiMessage }>; errors: LineError[] };
}

type GeneratedFn = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null };

/** The subset of ajv's ErrorObject the reasons are built from. */
interface ErrorObject {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

/**
 * The validators, generated ahead of time as plain code from the shipped schemas (codegen.js, ajv
 * standalone, JSON Schema draft 2020-12; v0.8's schema declares none and is read the same way).
 */
export function createValidator(): Validator {
  const fns = generated as unknown as Record<string, GeneratedFn>;
  const v08 = fns.v08;
  const v09: Record<string, GeneratedFn> = {};
  for (const kind of V09_KINDS) v09[kind] = fns[`v09_${kind}`];
  const v09Any = fns.v09;
  const basicComponents = (v09Basic as { components: Record<string, unknown> }).components;
  const componentFn = (type: string): GeneratedFn | undefined =>
    Object.prototype.hasOwnProperty.call(basicComponents, type) ? fns[`v09_component_${type}`] : undefined;

  // An invalid updateComponents names the first component that fails its own type's schema
  // (the catalogue's oneOf over every type would only say "must match exactly one schema").
  const explainComponents = (msg: A2uiMessage): string | null => {
    const uc = msg.updateComponents;
    if (!isObject(uc) || !Array.isArray(uc.components)) return null;
    for (let i = 0; i < uc.components.length; i++) {
      const c = uc.components[i];
      const id = isObject(c) && typeof c.id === 'string' ? c.id : '?';
      const type = isObject(c) ? c.component : undefined;
      if (typeof type !== 'string') return `/updateComponents/components/${i} (id "${id}") has no "component" type`;
      const fn = componentFn(type);
      if (!fn) return `/updateComponents/components/${i} (id "${id}"): unknown component "${type}" (the basic catalogue has ${Object.keys(basicComponents).join(', ')})`;
      if (!fn(c)) return `/updateComponents/components/${i} (id "${id}", ${type}): ${describe(fn.errors).replace(/^\//, '')}`;
    }
    return null;
  };

  const validate = (line: string | unknown): Validation => {
    let msg: unknown = line;
    if (typeof line === 'string') {
      try {
        msg = JSON.parse(line);
      } catch (e) {
        return { ok: false, reason: `not JSON: ${e instanceof Error ? e.message : String(e)}` };
      }
    }
    const version = detectVersion(msg);
    if (!version) return { ok: false, reason: unknownVersionReason(msg) };
    const m = msg as A2uiMessage;
    if (version === 'v0.8') {
      if (Object.keys(m).length !== 1) return { ok: false, reason: `a v0.8 line holds exactly one of ${V08_KINDS.join(', ')}; this one has ${Object.keys(m).join(', ')}` };
      if (!v08(m)) return { ok: false, reason: describe(v08.errors) };
      return { ok: true, version, message: m };
    }
    const kinds = Object.keys(m).filter((k) => k !== 'version');
    if (kinds.length !== 1 || !Object.prototype.hasOwnProperty.call(v09, kinds[0])) {
      return { ok: false, reason: `a v0.9 line holds "version" and exactly one of ${V09_KINDS.join(', ')}; this one has ${kinds.join(', ') || 'none'}` };
    }
    const fn = v09[kinds[0]];
    if (!fn(m)) return { ok: false, reason: explainComponents(m) ?? describe(fn.errors) };
    // The whole-message schema too (its oneOf is what the spec states); normally a formality.
    if (!v09Any(m)) return { ok: false, reason: describe(v09Any.errors) };
    return { ok: true, version, message: m };
  };

  const validateJsonl: Validator['validateJsonl'] = (text) => {
    const messages: Array<{ line: number; version: A2uiVersion; message: A2uiMessage }> = [];
    const lines = text.split(/\r?\n/);
    for (let i = 0; i < lines.length; i++) {
      if (lines[i].trim() === '') continue;
      if (i >= MAX_LINES) return { messages, errors: [{ line: i + 1, reason: `more than ${MAX_LINES} lines` }] };
      const v = validate(lines[i]);
      if (!v.ok) return { messages, errors: [{ line: i + 1, reason: v.reason }] };
      messages.push({ line: i + 1, version: v.version, message: v.message });
    }
    return { messages, errors: [] };
  };

  return { validate, validateJsonl };
}

let shared: Validator | null = null;

/** The validator this page shares (compiled on first use). */
export function sharedValidator(): Validator {
  shared ??= createValidator();
  return shared;
}

/** Validates one line with the shared validator: {ok, version, message} or {ok: false, reason}. */
export function validate(line: string | unknown): Validation {
  return sharedValidator().validate(line);
}
