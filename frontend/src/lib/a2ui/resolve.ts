// Resolving bound values (Dyn, model.svelte.ts) against a surface's data model, and the v0.9
// basic catalogue's functions (catalogs/basic/catalog.json "functions": required, regex, length,
// numeric, email, formatString, formatNumber, formatCurrency, formatDate, pluralize, and, or, not;
// openUrl is an action, see actions). Reading through the reactive data model tracks what was read.
import { getAt, resolvePath, setAt, type Action, type Dyn, type Surface } from './model.svelte';

/** Where a component sits: its surface, its data context (absolute path), the UI's locale. */
export interface Scope {
  surface: Surface;
  /** "/" at the root; a template item's absolute path inside a template. */
  ctx: string;
  /** BCP 47 tag for numbers and dates ("en", "zh-CN"). */
  locale: string;
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The absolute path a path binding writes to, or null for a literal or a call. */
export function boundPath(d: Dyn | undefined, scope: Scope): string | null {
  return d && d.k === 'path' ? resolvePath(d.path, scope.ctx) : null;
}

/** The value of d (undefined for an absent binding or a missing path without a literal). */
export function evalDyn(d: Dyn | undefined, scope: Scope): unknown {
  if (!d) return undefined;
  if (d.k === 'lit') return d.v;
  if (d.k === 'path') {
    const v = getAt(scope.surface.data, resolvePath(d.path, scope.ctx), scope.surface.version);
    return v === undefined ? d.init : v;
  }
  return callFunction(d.call, d.args, scope);
}

/** A raw v0.9 argument (literal, {path}, {call}) evaluated. */
function arg(v: unknown, scope: Scope): unknown {
  if (isObject(v)) {
    if (typeof v.path === 'string' && Object.keys(v).length === 1) return evalDyn({ k: 'path', path: v.path }, scope);
    if (typeof v.call === 'string') return callFunction(v.call, isObject(v.args) ? v.args : {}, scope);
  }
  return v;
}

/** Text of a value for display: strings as they are, numbers and booleans as written, lists joined by ", ", objects as JSON. */
export function toText(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.map(toText).join(', ');
  try {
    return JSON.stringify(v);
  } catch {
    return '';
  }
}

function num(v: unknown): number {
  return typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** formatString: "${/abs/path}" and "${relative}" replaced by the values there; "\${" stays literal. */
export function formatString(template: string, scope: Scope): string {
  return template.replace(/(\\?)\$\{([^}]*)\}/g, (m, esc: string, expr: string) => {
    if (esc) return m.slice(1);
    const path = expr.trim();
    return toText(evalDyn({ k: 'path', path }, scope));
  });
}

/** A date from an ISO string, a Unix ms number or a Date; null when it is none. */
function toDate(v: unknown): Date | null {
  if (v instanceof Date) return isNaN(v.getTime()) ? null : v;
  if (typeof v === 'number') return new Date(v);
  if (typeof v === 'string' && v.trim() !== '') {
    const d = new Date(/^\d{1,2}:\d{2}/.test(v) ? `1970-01-01T${v}` : v);
    return isNaN(d.getTime()) ? null : d;
  }
  return null;
}

/** A subset of Unicode TR35 date patterns: y M d E h H m s a (text in quotes kept), in local time. */
export function formatDate(d: Date, pattern: string, locale: string): string {
  const part = (opts: Intl.DateTimeFormatOptions) => new Intl.DateTimeFormat(locale, opts).format(d);
  const pad = (n: number, w: number) => String(n).padStart(w, '0');
  return pattern.replace(/'([^']*)'|y+|M+|d+|E+|h+|H+|m+|s+|a+/g, (tok, quoted: string | undefined) => {
    if (quoted !== undefined) return quoted === '' ? "'" : quoted;
    const n = tok.length;
    switch (tok[0]) {
      case 'y':
        return n === 2 ? pad(d.getFullYear() % 100, 2) : String(d.getFullYear());
      case 'M':
        return n >= 4 ? part({ month: 'long' }) : n === 3 ? part({ month: 'short' }) : pad(d.getMonth() + 1, n);
      case 'd':
        return pad(d.getDate(), n);
      case 'E':
        return n >= 4 ? part({ weekday: 'long' }) : part({ weekday: 'short' });
      case 'h':
        return pad(d.getHours() % 12 === 0 ? 12 : d.getHours() % 12, n);
      case 'H':
        return pad(d.getHours(), n);
      case 'm':
        return pad(d.getMinutes(), n);
      case 's':
        return pad(d.getSeconds(), n);
      case 'a':
        return d.getHours() < 12 ? 'AM' : 'PM';
      default:
        return tok;
    }
  });
}

/** A v0.9 basic-catalogue function's value (an unknown function gives undefined). */
export function callFunction(name: string, rawArgs: Record<string, unknown>, scope: Scope): unknown {
  const a = (k: string) => arg(rawArgs[k], scope);
  switch (name) {
    case 'required': {
      const v = a('value');
      return !(v === undefined || v === null || v === '' || (Array.isArray(v) && v.length === 0));
    }
    case 'regex': {
      try {
        return new RegExp(String(a('pattern') ?? '')).test(toText(a('value')));
      } catch {
        return false;
      }
    }
    case 'length': {
      const n = toText(a('value')).length;
      const min = a('min');
      const max = a('max');
      return (typeof min !== 'number' || n >= min) && (typeof max !== 'number' || n <= max);
    }
    case 'numeric': {
      const n = num(a('value'));
      const min = a('min');
      const max = a('max');
      return !isNaN(n) && (typeof min !== 'number' || n >= min) && (typeof max !== 'number' || n <= max);
    }
    case 'email':
      return EMAIL.test(toText(a('value')));
    case 'formatString':
      return formatString(toText(rawArgs.value !== undefined && typeof rawArgs.value === 'string' ? rawArgs.value : a('value')), scope);
    case 'formatNumber': {
      const n = num(a('value'));
      if (isNaN(n)) return '';
      const dec = a('decimals');
      const grouping = a('grouping');
      const digits = typeof dec === 'number' && dec >= 0 && dec <= 20 ? dec : undefined;
      return new Intl.NumberFormat(scope.locale, { minimumFractionDigits: digits, maximumFractionDigits: digits ?? 3, useGrouping: grouping !== false }).format(n);
    }
    case 'formatCurrency': {
      const n = num(a('value'));
      if (isNaN(n)) return '';
      const currency = toText(a('currency')) || 'USD';
      const dec = a('decimals');
      try {
        return new Intl.NumberFormat(scope.locale, {
          style: 'currency',
          currency,
          ...(typeof dec === 'number' && dec >= 0 && dec <= 20 ? { minimumFractionDigits: dec, maximumFractionDigits: dec } : {}),
        }).format(n);
      } catch {
        return `${n} ${currency}`;
      }
    }
    case 'formatDate': {
      const d = toDate(a('value'));
      return d ? formatDate(d, toText(a('format')) || 'yyyy-MM-dd', scope.locale) : '';
    }
    case 'pluralize': {
      const n = num(a('value'));
      const cat = isNaN(n) ? 'other' : n === 0 && rawArgs.zero !== undefined ? 'zero' : new Intl.PluralRules(scope.locale).select(n);
      const pick = rawArgs[cat] !== undefined ? a(cat) : a('other');
      return toText(pick);
    }
    case 'and': {
      const vs = Array.isArray(rawArgs.values) ? rawArgs.values : [];
      return vs.every((v) => arg(v, scope) === true);
    }
    case 'or': {
      const vs = Array.isArray(rawArgs.values) ? rawArgs.values : [];
      return vs.some((v) => arg(v, scope) === true);
    }
    case 'not':
      return a('value') !== true;
    default:
      return undefined;
  }
}

/** A URL a component may load or open: http(s), data: (images, media) and blob: only; else null. */
export function safeUrl(v: unknown, kind: 'media' | 'link' = 'media'): string | null {
  const s = toText(v).trim();
  if (!s) return null;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return null;
  }
  if (u.protocol === 'http:' || u.protocol === 'https:') return u.href;
  if (kind === 'media' && (u.protocol === 'blob:' || (u.protocol === 'data:' && /^data:(image|video|audio)\//i.test(s)))) return s;
  return null;
}

/** The action event a press sends: its name and its context with every binding resolved (a snapshot). */
export function resolveAction(action: Action, scope: Scope): { name: string; context: Record<string, unknown> } | null {
  if (!('name' in action)) return null;
  const context: Record<string, unknown> = {};
  for (const [k, d] of Object.entries(action.context)) {
    const v = evalDyn(d, scope);
    context[k] = v === undefined ? null : JSON.parse(JSON.stringify(v));
  }
  return { name: action.name, context };
}

/**
 * Two-way binding: writes value at d's path (resolved in scope) and returns true; a literal or a
 * call has no place to write, and the input keeps the value itself (returns false).
 */
export function writeDyn(d: Dyn | undefined, scope: Scope, value: unknown): boolean {
  const path = boundPath(d, scope);
  if (!path) return false;
  setAt(scope.surface, path, value);
  return true;
}

/** The messages of the checks that fail now (v0.9 checks; an empty list when all pass). */
export function failingChecks(checks: { condition: Dyn; message: string }[] | undefined, scope: Scope): string[] {
  return (checks ?? []).filter((c) => evalDyn(c.condition, scope) !== true).map((c) => c.message);
}
