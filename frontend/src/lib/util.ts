/** Random UUID v4; falls back to getRandomValues where randomUUID is missing (non-secure contexts). */
export function uuid(): string {
  const c: Crypto | undefined = globalThis.crypto;
  if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  const b = new Uint8Array(16);
  if (c && typeof c.getRandomValues === 'function') c.getRandomValues(b);
  else for (let i = 0; i < 16; i++) b[i] = Math.floor(Math.random() * 256);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Trailing-edge debounce with cancel/flush. */
export function debounce<A extends unknown[]>(fn: (...args: A) => void, ms: number) {
  return trailing(fn, ms, true);
}

/**
 * Throttle: calls fn at most once per `ms`, at the end of the window, with the latest arguments;
 * unlike debounce it still fires while calls keep coming (e.g. a steady stream of progress events).
 */
export function throttle<A extends unknown[]>(fn: (...args: A) => void, ms: number) {
  return trailing(fn, ms, false);
}

/** Calls fn with the latest arguments `ms` after a call; `restart` makes each call push the deadline back (debounce). */
function trailing<A extends unknown[]>(fn: (...args: A) => void, ms: number, restart: boolean) {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let last: A | null = null;
  const f = (...args: A) => {
    last = args;
    if (timer !== null) {
      if (!restart) return;
      clearTimeout(timer);
    }
    timer = setTimeout(() => {
      timer = null;
      const a = last as A;
      last = null;
      fn(...a);
    }, ms);
  };
  f.cancel = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    last = null;
  };
  return f;
}

/** Storage access that never throws (private mode, disabled storage). */
export function safeGet(storage: Storage | null | undefined, key: string): string | null {
  try {
    return storage ? storage.getItem(key) : null;
  } catch {
    return null;
  }
}

export function safeSet(storage: Storage | null | undefined, key: string, value: string | null): void {
  try {
    if (!storage) return;
    if (value === null) storage.removeItem(key);
    else storage.setItem(key, value);
  } catch {
    /* ignore */
  }
}

/**
 * Category labels the backend's wrapped error texts carry ("import a.md: memory: invalid input:
 * empty content"). They repeat what the error code says and mean nothing to people, so errorText
 * drops them when more text follows.
 */
const ERROR_LABELS = /(^|: )(?:(?:memory|chat|history): )?(?:invalid input|busy): (?=\S)|(^|: )(?:memory|chat|history): (?=\S)/g;

/** Drops the category labels (ERROR_LABELS) from a server error message. */
export function plainMessage(message: string): string {
  return message.replace(ERROR_LABELS, (_m, a?: string, b?: string) => a ?? b ?? '');
}

/**
 * The text to show people for an error: the message without the protocol code and without the
 * backend's category labels (see plainMessage). The code stays available through errorCode.
 */
export function errorText(err: unknown): string {
  if (err == null) return '';
  if (typeof err === 'string') return plainMessage(err);
  if (typeof err === 'object') {
    const e = err as { code?: unknown; message?: unknown };
    const msg = typeof e.message === 'string' ? e.message : '';
    const code = typeof e.code === 'string' ? e.code : '';
    if (msg) return plainMessage(msg);
    if (code) return code;
  }
  try {
    return JSON.stringify(err);
  } catch {
    return String(err);
  }
}

/** The protocol error code of an error (GatewayError, or a wire `{code, message}`), or ''. */
export function errorCode(err: unknown): string {
  if (err && typeof err === 'object') {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return '';
}

/** Tooltip text for an error: its code and its full, unedited message. */
export function errorTitle(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { code?: unknown; message?: unknown };
    const parts = [e.code, e.message].filter((x): x is string => typeof x === 'string' && x !== '');
    if (parts.length > 0) return parts.join(': ');
  }
  return typeof err === 'string' ? err : '';
}

/** What copyText needs of the page (tests pass their own). */
export interface CopyEnv {
  clipboard?: { writeText(text: string): Promise<void> } | null;
  document?: Document | null;
}

/**
 * Puts text on the clipboard: the Clipboard API, else (no API, not a secure context, refused) a
 * selected hidden textarea and the copy command, which desktop webviews still honour. false when
 * both fail; the caller then asks the person to select and copy the text.
 */
export async function copyText(text: string, env: CopyEnv = { clipboard: globalThis.navigator?.clipboard, document: globalThis.document }): Promise<boolean> {
  try {
    if (env.clipboard?.writeText) {
      await env.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the copy command
  }
  const doc = env.document;
  if (!doc?.body) return false;
  const ta = doc.createElement('textarea');
  ta.value = text;
  ta.setAttribute('readonly', '');
  ta.style.position = 'fixed';
  ta.style.opacity = '0';
  doc.body.appendChild(ta);
  try {
    ta.select();
    return typeof doc.execCommand === 'function' && doc.execCommand('copy');
  } catch {
    return false;
  } finally {
    ta.remove();
  }
}
