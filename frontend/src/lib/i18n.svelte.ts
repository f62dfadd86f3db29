// The UI's language (SPEC §9: Chinese and English are both first-class). Every text the UI shows
// comes from t(key, vars) over the catalogue in messages.ts; the language is chosen once from the
// stored choice or the browser's languages (pickLang), can be switched at any time (setLang), and
// every template that called t() re-renders when it changes (the language is reactive state).
import { MESSAGES, type MessageKey, type Vars } from './messages';
import { safeGet, safeSet } from './util';

export type Lang = 'en' | 'zh';
export const LANGS: readonly Lang[] = ['en', 'zh'];
/** localStorage key of the person's choice. */
export const LANG_KEY = 'atrium.lang';

/** The stored choice when valid, else the first of the browser's languages that is Chinese or English, else English. */
export function pickLang(stored: string | null | undefined, languages: readonly string[] | undefined): Lang {
  if (stored === 'en' || stored === 'zh') return stored;
  for (const l of languages ?? []) {
    const x = l.toLowerCase();
    if (x === 'zh' || x.startsWith('zh-')) return 'zh';
    if (x === 'en' || x.startsWith('en-')) return 'en';
  }
  return 'en';
}

function storage(): Storage | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null;
  }
}

/** The system's languages the desktop window injected (window.__ATRIUM__.languages), then the browser's. */
function browserLanguages(): readonly string[] {
  const injected = (globalThis as { __ATRIUM__?: { languages?: unknown } }).__ATRIUM__?.languages;
  const system = Array.isArray(injected) ? injected.filter((l): l is string => typeof l === 'string') : [];
  const n = globalThis.navigator;
  if (!n) return system;
  return [...system, ...(n.languages && n.languages.length > 0 ? n.languages : n.language ? [n.language] : [])];
}

const state = $state<{ lang: Lang }>({ lang: pickLang(safeGet(storage(), LANG_KEY), browserLanguages()) });

/** The language in use (reactive: reading it in a template or $derived follows changes). */
export function lang(): Lang {
  return state.lang;
}

/** BCP 47 tag of a language, for the document's lang attribute. */
export function langTag(l: Lang): string {
  return l === 'zh' ? 'zh-CN' : 'en';
}

/** Switches the language and remembers the choice. */
export function setLang(l: Lang): void {
  state.lang = l;
  safeSet(storage(), LANG_KEY, l);
  if (globalThis.document) document.documentElement.lang = langTag(l);
}

/** Forgets the stored choice and goes back to the browser's languages (tests, "use the system language"). */
export function resetLang(): void {
  safeSet(storage(), LANG_KEY, null);
  state.lang = pickLang(null, browserLanguages());
}

/** Replaces {name} with vars.name (a missing var stays as written, so a mistake shows). */
export function interpolate(text: string, vars?: Vars): string {
  if (!vars) return text;
  return text.replace(/\{(\w+)\}/g, (m, k: string) => (vars[k] === undefined ? m : String(vars[k])));
}

/** The text of key in the language in use (or in l). */
export function t(key: MessageKey, vars?: Vars, l: Lang = state.lang): string {
  const m = MESSAGES[key][l === 'zh' ? 1 : 0];
  return typeof m === 'function' ? m(vars ?? {}) : interpolate(m, vars);
}

/**
 * Sentences shown one after another in language l: English puts a space between them, Chinese
 * none (a sentence ends with its full stop "。").
 */
export function sentences(parts: string[], l: Lang = state.lang): string {
  return parts.filter((p) => p !== '').join(l === 'zh' ? '' : ' ');
}
