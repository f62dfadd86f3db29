// The A2UI model processor: applies validated A2UI messages (v0.8 and v0.9, see validate.ts) to
// surfaces the renderer (components/a2ui/Surface.svelte) draws. One processor per Canvas (the
// desktop panel, the phone page). Contract: docs/PROTOCOL.md "Canvas and A2UI".
//
// Components of both versions are normalised into one shape (Comp: a type of the v0.8 standard
// catalogue or ChoicePicker, with version-neutral property names and Dyn values), so one set of
// Svelte components draws both. A surface's data model is reactive state ($state): a component
// that reads /user/name re-renders when that value changes and nothing else does.
//
// Bindings (Dyn): a literal; a path (JSON Pointer, absolute "/a/b" or relative to the data
// context of a template item, "." being the item itself; v0.8 also "a.b" and "a[0]"); v0.8's
// path + literal (the literal until the path holds a value); v0.9's function call (functions.ts).
import { writable, type Readable } from 'svelte/store';
import { validate as sharedValidate, messageKind, type A2uiMessage, type A2uiVersion, type LineError, type Validation } from './validate';

/** A bound value. */
export type Dyn =
  | { k: 'lit'; v: unknown }
  | { k: 'path'; path: string; init?: unknown }
  | { k: 'call'; call: string; args: Record<string, unknown> };

/** Children of a container: fixed ids, or one component repeated over the items at a data path. */
export type Children = { ids: string[] } | { template: string; path: string };

/** A v0.9 client-side check (TextField etc.): shown when condition is false. */
export interface Check {
  condition: Dyn;
  message: string;
}

/** A Button's action: a server event with its context, or (v0.9) a local function. */
export type Action = { name: string; context: Record<string, Dyn> } | { fn: { call: string; args: Record<string, unknown> } };

/** One component, normalised. p's keys depend on type (see normaliseV08 / normaliseV09). */
export interface Comp {
  id: string;
  type: string;
  weight?: number;
  /** Accessible name and description (v0.9 accessibility). */
  a11y?: { label?: Dyn; description?: Dyn };
  p: Record<string, any>;
}

export interface SurfaceStyles {
  font?: string;
  /** #rrggbb */
  primaryColor?: string;
  agentDisplayName?: string;
  iconUrl?: string;
}

/** The component types the renderer draws (the v0.8 standard catalogue, and v0.9's ChoicePicker). */
export const COMPONENT_TYPES = [
  'Text', 'Image', 'Icon', 'Video', 'AudioPlayer', 'Row', 'Column', 'List', 'Card', 'Tabs', 'Divider',
  'Modal', 'Button', 'CheckBox', 'TextField', 'DateTimeInput', 'MultipleChoice', 'ChoicePicker', 'Slider',
] as const;

/** Deepest component nesting drawn (a deeper branch shows an error, as a cycle does). */
export const MAX_DEPTH = 64;

/** One surface: its components, data model and styles, all reactive. */
export class Surface {
  readonly id: string;
  readonly version: A2uiVersion;
  /** The root component's id; null until beginRendering (v0.8). v0.9 surfaces have root "root". */
  root = $state<string | null>(null);
  /**
   * Replaced as a whole on each component update (not deeply reactive: a Comp never changes in
   * place), so reading a component costs no proxy; a node whose Comp is the same object does not re-render.
   */
  components = $state.raw<Record<string, Comp>>({});
  data = $state<Record<string, unknown>>({});
  styles = $state<SurfaceStyles>({});
  catalogId = $state<string | undefined>(undefined);
  /** v0.9 createSurface.sendDataModel. */
  sendDataModel = $state(false);

  constructor(id: string, version: A2uiVersion) {
    this.id = id;
    this.version = version;
    if (version === 'v0.9') this.root = 'root';
  }
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ---------- paths ----------

function unescapePointer(s: string): string {
  return s.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** The segments of an absolute path. v0.8 paths may use "a.b" and "a[0]" as well as "/a/b". */
export function segments(path: string, version: A2uiVersion): string[] {
  let p = path;
  if (version === 'v0.8') p = p.replace(/\[(\d+)\]/g, '/$1').replace(/\./g, '/');
  return p
    .split('/')
    .filter((s) => s !== '')
    .map(unescapePointer);
}

/** Resolves path against the data context ctx (an absolute path): absolute paths stand, "." is ctx. */
export function resolvePath(path: string, ctx: string): string {
  if (path.startsWith('/')) return path;
  if (path === '.' || path === '' || path === './') return ctx;
  const rel = path.startsWith('./') ? path.slice(2) : path;
  return ctx === '/' || ctx === '' ? `/${rel}` : `${ctx.replace(/\/$/, '')}/${rel}`;
}

/** The value at an absolute path (undefined when any step is missing). Reading it tracks it. */
export function getAt(root: unknown, path: string, version: A2uiVersion): unknown {
  let cur: unknown = root;
  for (const seg of segments(path, version)) {
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(seg)) return undefined;
      cur = cur[Number(seg)];
    } else if (isObject(cur)) {
      if (!Object.prototype.hasOwnProperty.call(cur, seg)) return undefined;
      cur = cur[seg];
    } else {
      return undefined;
    }
  }
  return cur;
}

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Sets (or, with value undefined, removes) the value at an absolute path, creating objects on the
 * way. The root ("/") is replaced only by an object. Keys that would reach Object.prototype are refused.
 * Throws an Error saying why a path cannot be set.
 */
export function setAt(surface: Surface, path: string, value: unknown): void {
  const segs = segments(path, surface.version);
  for (const s of segs) if (FORBIDDEN_KEYS.has(s)) throw new Error(`path ${path}: key "${s}" is not allowed`);
  if (segs.length === 0) {
    if (value === undefined) surface.data = {};
    else if (isObject(value)) surface.data = value;
    else throw new Error('the root of the data model must be an object');
    return;
  }
  let cur: any = surface.data;
  for (let i = 0; i < segs.length - 1; i++) {
    const seg = segs[i];
    let next = Array.isArray(cur) ? (/^\d+$/.test(seg) ? cur[Number(seg)] : undefined) : cur[seg];
    if (next === undefined || next === null || typeof next !== 'object') {
      if (Array.isArray(cur) && !/^\d+$/.test(seg)) throw new Error(`path ${path}: "${seg}" is not an index of a list`);
      next = {};
      if (Array.isArray(cur)) cur[Number(seg)] = next;
      else cur[seg] = next;
      next = Array.isArray(cur) ? cur[Number(seg)] : cur[seg];
    }
    cur = next;
  }
  const last = segs[segs.length - 1];
  if (Array.isArray(cur)) {
    if (!/^\d+$/.test(last)) throw new Error(`path ${path}: "${last}" is not an index of a list`);
    if (value === undefined) cur.splice(Number(last), 1);
    else cur[Number(last)] = value;
  } else if (value === undefined) {
    delete cur[last];
  } else {
    cur[last] = value;
  }
}

// ---------- v0.8 ----------

function parseIfJson(v: string): unknown {
  const s = v.trim();
  if ((s.startsWith('{') && s.endsWith('}')) || (s.startsWith('[') && s.endsWith(']'))) {
    try {
      return JSON.parse(s);
    } catch {
      return v;
    }
  }
  return v;
}

function entryValue(e: Record<string, any>): { ok: boolean; v?: unknown } {
  if ('valueString' in e) return { ok: true, v: parseIfJson(String(e.valueString)) };
  if ('valueNumber' in e) return { ok: true, v: e.valueNumber };
  if ('valueBoolean' in e) return { ok: true, v: e.valueBoolean };
  if ('valueMap' in e && Array.isArray(e.valueMap)) return { ok: true, v: contentsToObject(e.valueMap) };
  return { ok: false };
}

/** v0.8 dataModelUpdate contents ([{key, valueString|valueNumber|valueBoolean|valueMap}]) as a plain object. */
export function contentsToObject(contents: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const e of contents) {
    if (!isObject(e) || typeof e.key !== 'string' || FORBIDDEN_KEYS.has(e.key)) continue;
    const { ok, v } = entryValue(e);
    if (ok) out[e.key] = v;
  }
  return out;
}

function dyn08(v: unknown): Dyn | undefined {
  if (!isObject(v)) return undefined;
  const lit = 'literalString' in v ? v.literalString : 'literalNumber' in v ? v.literalNumber : 'literalBoolean' in v ? v.literalBoolean : 'literalArray' in v ? v.literalArray : undefined;
  if (typeof v.path === 'string') return { k: 'path', path: v.path, init: lit };
  if (lit !== undefined) return { k: 'lit', v: lit };
  return undefined;
}

function children08(v: any): Children {
  if (isObject(v) && Array.isArray(v.explicitList)) return { ids: v.explicitList.filter((x: unknown) => typeof x === 'string') };
  if (isObject(v) && isObject(v.template)) return { template: String(v.template.componentId ?? ''), path: String(v.template.dataBinding ?? '') };
  return { ids: [] };
}

/** A v0.8 component ({id, weight?, component: {Type: {...}}}) normalised. */
export function normaliseV08(c: Record<string, any>): Comp {
  const type = Object.keys(c.component ?? {})[0] ?? 'Unknown';
  const s: Record<string, any> = c.component?.[type] ?? {};
  const base = { id: String(c.id), type, weight: typeof c.weight === 'number' ? c.weight : undefined };
  const p: Record<string, any> = {};
  switch (type) {
    case 'Text':
      p.text = dyn08(s.text);
      p.hint = s.usageHint ?? 'body';
      break;
    case 'Image':
      p.url = dyn08(s.url);
      p.alt = dyn08(s.altText);
      p.fit = s.fit;
      p.hint = s.usageHint;
      break;
    case 'Icon':
      p.name = dyn08(s.name);
      break;
    case 'Video':
      p.url = dyn08(s.url);
      break;
    case 'AudioPlayer':
      p.url = dyn08(s.url);
      p.description = dyn08(s.description);
      break;
    case 'Row':
    case 'Column':
    case 'List':
      p.children = children08(s.children);
      p.justify = s.distribution;
      p.align = s.alignment;
      p.direction = s.direction;
      break;
    case 'Card':
      p.child = s.child;
      break;
    case 'Tabs':
      p.tabs = (Array.isArray(s.tabItems) ? s.tabItems : []).map((t: any) => ({ title: dyn08(t?.title), child: t?.child }));
      break;
    case 'Divider':
      p.axis = s.axis ?? 'horizontal';
      break;
    case 'Modal':
      p.trigger = s.entryPointChild;
      p.content = s.contentChild;
      break;
    case 'Button': {
      p.child = s.child;
      p.primary = s.primary === true;
      const ctx: Record<string, Dyn> = {};
      for (const e of Array.isArray(s.action?.context) ? s.action.context : []) {
        if (isObject(e) && typeof e.key === 'string') ctx[e.key] = dyn08(e.value) ?? { k: 'lit', v: null };
      }
      p.action = { name: String(s.action?.name ?? ''), context: ctx } satisfies Action;
      break;
    }
    case 'CheckBox':
      p.label = dyn08(s.label);
      p.value = dyn08(s.value);
      break;
    case 'TextField':
      p.label = dyn08(s.label);
      p.value = dyn08(s.text);
      p.kind = s.textFieldType ?? 'shortText';
      p.regexp = s.validationRegexp;
      break;
    case 'DateTimeInput':
      p.value = dyn08(s.value);
      p.enableDate = s.enableDate !== false;
      p.enableTime = s.enableTime === true;
      break;
    case 'MultipleChoice':
      p.selections = dyn08(s.selections);
      p.options = (Array.isArray(s.options) ? s.options : []).map((o: any) => ({ label: dyn08(o?.label), value: String(o?.value ?? '') }));
      p.max = typeof s.maxAllowedSelections === 'number' ? s.maxAllowedSelections : null;
      p.style = s.variant === 'chips' ? 'chips' : 'checkbox';
      p.filterable = s.filterable === true;
      break;
    case 'Slider':
      p.label = dyn08(s.label);
      p.value = dyn08(s.value);
      p.min = typeof s.minValue === 'number' ? s.minValue : 0;
      p.max = typeof s.maxValue === 'number' ? s.maxValue : 100;
      break;
    default:
      p.raw = s;
  }
  return { ...base, p };
}

// ---------- v0.9 ----------

function dyn09(v: unknown): Dyn | undefined {
  if (v === undefined) return undefined;
  if (isObject(v)) {
    if (typeof v.path === 'string') return { k: 'path', path: v.path };
    if (typeof v.call === 'string') return { k: 'call', call: v.call, args: isObject(v.args) ? v.args : {} };
    return { k: 'lit', v };
  }
  return { k: 'lit', v };
}

function children09(v: unknown): Children {
  if (Array.isArray(v)) return { ids: v.filter((x): x is string => typeof x === 'string') };
  if (isObject(v)) return { template: String(v.componentId ?? ''), path: String(v.path ?? '') };
  return { ids: [] };
}

function checks09(v: unknown): Check[] {
  if (!Array.isArray(v)) return [];
  return v.filter(isObject).map((c) => ({ condition: dyn09(c.condition) ?? { k: 'lit', v: true }, message: String(c.message ?? '') }));
}

/** A v0.9 component ({id, component: "Type", ...props}) normalised. */
export function normaliseV09(c: Record<string, any>): Comp {
  const type = typeof c.component === 'string' ? c.component : 'Unknown';
  const base: Comp = { id: String(c.id), type, weight: typeof c.weight === 'number' ? c.weight : undefined, p: {} };
  if (isObject(c.accessibility)) base.a11y = { label: dyn09(c.accessibility.label), description: dyn09(c.accessibility.description) };
  const p = base.p;
  switch (type) {
    case 'Text':
      p.text = dyn09(c.text);
      p.hint = c.variant ?? 'body';
      break;
    case 'Image':
      p.url = dyn09(c.url);
      p.alt = dyn09(c.description);
      p.fit = c.fit === 'scaleDown' ? 'scale-down' : c.fit;
      p.hint = c.variant;
      break;
    case 'Icon':
      if (isObject(c.name) && typeof c.name.svgPath === 'string') p.svgPath = c.name.svgPath;
      else p.name = dyn09(c.name);
      break;
    case 'Video':
      p.url = dyn09(c.url);
      break;
    case 'AudioPlayer':
      p.url = dyn09(c.url);
      p.description = dyn09(c.description);
      break;
    case 'Row':
    case 'Column':
    case 'List':
      p.children = children09(c.children);
      p.justify = c.justify;
      p.align = c.align;
      p.direction = c.direction;
      break;
    case 'Card':
      p.child = c.child;
      break;
    case 'Tabs':
      p.tabs = (Array.isArray(c.tabs) ? c.tabs : []).map((t: any) => ({ title: dyn09(t?.title), child: t?.child }));
      break;
    case 'Divider':
      p.axis = c.axis ?? 'horizontal';
      break;
    case 'Modal':
      p.trigger = c.trigger;
      p.content = c.content;
      break;
    case 'Button': {
      p.child = c.child;
      p.primary = c.variant === 'primary';
      p.borderless = c.variant === 'borderless';
      const a = c.action;
      if (isObject(a) && isObject(a.event)) {
        const ctx: Record<string, Dyn> = {};
        if (isObject(a.event.context)) for (const [k, v] of Object.entries(a.event.context)) ctx[k] = dyn09(v) ?? { k: 'lit', v: null };
        p.action = { name: String(a.event.name ?? ''), context: ctx } satisfies Action;
      } else if (isObject(a) && isObject(a.functionCall)) {
        p.action = { fn: { call: String(a.functionCall.call ?? ''), args: isObject(a.functionCall.args) ? a.functionCall.args : {} } } satisfies Action;
      }
      p.checks = checks09(c.checks);
      break;
    }
    case 'CheckBox':
      p.label = dyn09(c.label);
      p.value = dyn09(c.value);
      p.checks = checks09(c.checks);
      break;
    case 'TextField':
      p.label = dyn09(c.label);
      p.value = dyn09(c.value);
      p.kind = c.variant ?? 'shortText';
      p.regexp = c.validationRegexp;
      p.checks = checks09(c.checks);
      break;
    case 'DateTimeInput':
      p.value = dyn09(c.value);
      p.label = dyn09(c.label);
      p.enableDate = c.enableDate !== false;
      p.enableTime = c.enableTime === true;
      p.min = dyn09(c.min);
      p.max = dyn09(c.max);
      p.checks = checks09(c.checks);
      break;
    case 'ChoicePicker':
      p.label = dyn09(c.label);
      p.selections = dyn09(c.value);
      p.options = (Array.isArray(c.options) ? c.options : []).map((o: any) => ({ label: dyn09(o?.label), value: String(o?.value ?? '') }));
      p.max = c.variant === 'mutuallyExclusive' ? 1 : null;
      p.style = c.displayStyle === 'chips' ? 'chips' : 'checkbox';
      p.filterable = c.filterable === true;
      p.checks = checks09(c.checks);
      break;
    case 'Slider':
      p.label = dyn09(c.label);
      p.value = dyn09(c.value);
      p.min = typeof c.min === 'number' ? c.min : 0;
      p.max = typeof c.max === 'number' ? c.max : 100;
      p.checks = checks09(c.checks);
      break;
    default:
      p.raw = c;
  }
  return base;
}

// ---------- the processor ----------

/** A component's id, refused when it would reach Object.prototype. */
function componentId(c: Record<string, any>): string {
  const id = String(c.id);
  if (FORBIDDEN_KEYS.has(id)) throw new Error(`component id "${id}" is not allowed`);
  return id;
}

/** What apply() did: how many messages applied, and why the one that stopped it did not (1-based line in the batch). */
export interface ApplyResult {
  applied: number;
  errors: LineError[];
  /** The surfaces the batch changed (created, updated or deleted), in first-touched order. */
  surfaces: string[];
}

export interface ProcessorOptions {
  /**
   * Validates each message before it applies (default: the shared validator over the shipped
   * schemas). The gateway validates too; the renderer does not trust that it did.
   */
  validate?: (line: unknown) => Validation;
  /** Most surfaces kept at once (default 16, as the gateway's per-target bound). */
  maxSurfaces?: number;
}

export interface Processor {
  /** The surfaces, oldest first (a new array whenever one is created or deleted). */
  readonly surfaces: Readable<Surface[]>;
  /** The surface with that id, if any. */
  get(surfaceId: string): Surface | undefined;
  /**
   * Applies messages (parsed objects or JSON lines) in order. The first message that is invalid
   * or cannot apply (v0.9: a surface not created, created twice) stops the batch; those before it
   * stand. Structural problems found after (a component cycle) are reported too, without undoing.
   */
  apply(messages: readonly unknown[]): ApplyResult;
  /** Removes one surface, or all (no id). Returns the ids removed. */
  reset(surfaceId?: string): string[];
}

export function createProcessor(opts: ProcessorOptions = {}): Processor {
  const validate = opts.validate ?? sharedValidate;
  const maxSurfaces = opts.maxSurfaces ?? 16;
  const map = new Map<string, Surface>();
  const store = writable<Surface[]>([]);
  const publish = () => store.set([...map.values()]);

  function applyOne(version: A2uiVersion, m: A2uiMessage): { surfaceId: string; created: boolean; deleted: boolean } {
    const kind = messageKind(m);
    const body = m[kind] as Record<string, any>;
    const surfaceId = String(body.surfaceId);
    let s = map.get(surfaceId);
    if (s && s.version !== version) throw new Error(`surface "${surfaceId}" is ${s.version}; a ${version} line cannot change it`);
    const make = (): Surface => {
      if (map.size >= maxSurfaces) throw new Error(`at most ${maxSurfaces} surfaces at once`);
      const n = new Surface(surfaceId, version);
      map.set(surfaceId, n);
      return n;
    };
    if (kind === 'deleteSurface') {
      if (!s) {
        if (version === 'v0.9') throw new Error(`deleteSurface: no surface "${surfaceId}"`);
        return { surfaceId, created: false, deleted: false };
      }
      map.delete(surfaceId);
      return { surfaceId, created: false, deleted: true };
    }
    let created = false;
    if (version === 'v0.9') {
      if (kind === 'createSurface') {
        if (s) throw new Error(`createSurface: surface "${surfaceId}" already exists (delete it first)`);
        s = make();
        created = true;
        s.catalogId = body.catalogId;
        s.sendDataModel = body.sendDataModel === true;
        const theme = isObject(body.theme) ? body.theme : {};
        s.styles = {
          primaryColor: typeof theme.primaryColor === 'string' ? theme.primaryColor : undefined,
          agentDisplayName: typeof theme.agentDisplayName === 'string' ? theme.agentDisplayName : undefined,
          iconUrl: typeof theme.iconUrl === 'string' ? theme.iconUrl : undefined,
        };
        return { surfaceId, created, deleted: false };
      }
      if (!s) throw new Error(`${kind}: no surface "${surfaceId}" (send createSurface first)`);
      if (kind === 'updateComponents') {
        const next = { ...s.components };
        for (const c of body.components as Record<string, any>[]) next[componentId(c)] = normaliseV09(c);
        s.components = next;
      } else if (kind === 'updateDataModel') {
        const path = typeof body.path === 'string' ? body.path : '/';
        setAt(s, path, 'value' in body ? structuredClone(body.value) : undefined);
      }
      return { surfaceId, created, deleted: false };
    }
    // v0.8: any message creates its surface; it shows once beginRendering named the root.
    if (!s) {
      s = make();
      created = true;
    }
    if (kind === 'beginRendering') {
      s.root = String(body.root);
      s.catalogId = body.catalogId;
      const st = isObject(body.styles) ? body.styles : {};
      s.styles = { font: typeof st.font === 'string' ? st.font : undefined, primaryColor: typeof st.primaryColor === 'string' ? st.primaryColor : undefined };
    } else if (kind === 'surfaceUpdate') {
      const next = { ...s.components };
      for (const c of body.components as Record<string, any>[]) next[componentId(c)] = normaliseV08(c);
      s.components = next;
    } else if (kind === 'dataModelUpdate') {
      const path = typeof body.path === 'string' ? body.path : '/';
      const contents = body.contents as Record<string, any>[];
      // [{key: ".", value…}] sets the value at path itself (the reference processor's convention).
      if (contents.length === 1 && contents[0].key === '.') {
        const { ok, v } = entryValue(contents[0]);
        if (ok) setAt(s, path, v);
      } else if (segments(path, 'v0.8').length === 0) {
        setAt(s, '/', contentsToObject(contents));
      } else {
        setAt(s, path, contentsToObject(contents));
      }
    }
    return { surfaceId, created, deleted: false };
  }

  return {
    surfaces: { subscribe: store.subscribe },
    get: (id) => map.get(id),
    apply(messages) {
      const touched: string[] = [];
      const errors: LineError[] = [];
      let applied = 0;
      let structural = false;
      // Only a change of components or root can make a cycle: data updates skip the walk.
      const shaped = new Set<string>();
      for (let i = 0; i < messages.length; i++) {
        const v = validate(messages[i]);
        if (!v.ok) {
          errors.push({ line: i + 1, reason: v.reason });
          break;
        }
        try {
          const r = applyOne(v.version, v.message);
          if (!touched.includes(r.surfaceId)) touched.push(r.surfaceId);
          const kind = messageKind(v.message);
          if (kind === 'surfaceUpdate' || kind === 'updateComponents' || kind === 'beginRendering') shaped.add(r.surfaceId);
          if (r.created || r.deleted) structural = true;
          applied++;
        } catch (e) {
          errors.push({ line: i + 1, reason: e instanceof Error ? e.message : String(e) });
          break;
        }
      }
      if (structural) publish();
      for (const id of shaped) {
        const s = map.get(id);
        const cycle = s ? findCycle(s) : null;
        if (cycle) errors.push({ line: messages.length, reason: `surface "${id}": components form a cycle (${cycle.join(' → ')}); that branch is not drawn` });
      }
      return { applied, errors, surfaces: touched };
    },
    reset(surfaceId) {
      const removed = surfaceId === undefined ? [...map.keys()] : map.has(surfaceId) ? [surfaceId] : [];
      for (const id of removed) map.delete(id);
      if (removed.length) publish();
      return removed;
    },
  };
}

/** The ids a component draws as its children (templates count their one component). */
export function childIds(c: Comp): string[] {
  const p = c.p;
  switch (c.type) {
    case 'Row':
    case 'Column':
    case 'List': {
      const ch = p.children as Children;
      return 'ids' in ch ? ch.ids : [ch.template];
    }
    case 'Card':
    case 'Button':
      return typeof p.child === 'string' ? [p.child] : [];
    case 'Tabs':
      return (p.tabs as { child?: unknown }[]).map((t) => t.child).filter((x): x is string => typeof x === 'string');
    case 'Modal':
      return [p.trigger, p.content].filter((x): x is string => typeof x === 'string');
    default:
      return [];
  }
}

/** A cycle reachable from the root (ids, the first repeated at the end), or null. */
export function findCycle(s: Surface): string[] | null {
  if (!s.root) return null;
  const comps = s.components;
  const state = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const visit = (id: string): string[] | null => {
    const c = comps[id];
    if (!c) return null;
    if (state.get(id) === 2) return null;
    if (state.get(id) === 1) return [...stack.slice(stack.indexOf(id)), id];
    state.set(id, 1);
    stack.push(id);
    for (const ch of childIds(c)) {
      const found = visit(ch);
      if (found) return found;
    }
    stack.pop();
    state.set(id, 2);
    return null;
  };
  return visit(s.root);
}
