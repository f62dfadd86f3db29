// Where to connect and with which token.
// Order: window.__ATRIUM__ (injected by the desktop window) → URL fragment #token=… → localStorage.
import { safeGet, safeSet, uuid } from './util';

export const TOKEN_KEY = 'atrium.token';
export const INSTANCE_KEY = 'atrium.instanceId';
export const DEFAULT_WS_URL = 'ws://127.0.0.1:18789/ws';

export interface InjectedSettings {
  wsUrl?: string;
  token?: string;
  /** The system's languages (the desktop window's, from the environment: WebKitGTK's navigator.languages does not follow them). */
  languages?: string[];
}

declare global {
  interface Window {
    __ATRIUM__?: InjectedSettings;
  }
}

export interface LocationLike {
  protocol: string;
  host: string;
  pathname: string;
  search: string;
  hash: string;
}

export interface SettingsEnv {
  injected?: InjectedSettings | null;
  location: LocationLike;
  storage?: Storage | null;
  /** Replaces the visible URL (history.replaceState) once the token was taken out of the fragment. */
  replaceUrl?: (url: string) => void;
}

export interface ConnectionSettings {
  wsUrl: string;
  token: string | null;
  /** Where the token came from. */
  tokenSource: 'injected' | 'fragment' | 'storage' | 'none';
}

/** ws(s)://host/ws for pages served over http(s); the default loopback gateway otherwise (file:, wails:). */
export function wsUrlFor(loc: LocationLike): string {
  if ((loc.protocol === 'http:' || loc.protocol === 'https:') && loc.host) {
    return `${loc.protocol === 'https:' ? 'wss' : 'ws'}://${loc.host}/ws`;
  }
  return DEFAULT_WS_URL;
}

/** Reads `token` from a fragment like "#token=abc" or "#a=1&token=abc"; returns the fragment without it. */
export function takeTokenFromHash(hash: string): { token: string | null; rest: string } {
  const raw = hash.startsWith('#') ? hash.slice(1) : hash;
  if (!raw) return { token: null, rest: '' };
  const params = new URLSearchParams(raw);
  const token = params.get('token');
  if (token === null) return { token: null, rest: hash };
  params.delete('token');
  const rest = params.toString();
  return { token: token.trim() || null, rest: rest ? `#${rest}` : '' };
}

export function resolveSettings(env: SettingsEnv): ConnectionSettings {
  const injected = env.injected ?? null;
  const wsUrl = injected?.wsUrl?.trim() || wsUrlFor(env.location);

  let fragmentToken: string | null = null;
  const { token, rest } = takeTokenFromHash(env.location.hash || '');
  if (token !== null || rest !== (env.location.hash || '')) {
    fragmentToken = token;
    if (fragmentToken) safeSet(env.storage, TOKEN_KEY, fragmentToken);
    env.replaceUrl?.(`${env.location.pathname}${env.location.search}${rest}`);
  }

  if (injected?.token?.trim()) return { wsUrl, token: injected.token.trim(), tokenSource: 'injected' };
  if (fragmentToken) return { wsUrl, token: fragmentToken, tokenSource: 'fragment' };
  const stored = safeGet(env.storage, TOKEN_KEY);
  if (stored && stored.trim()) return { wsUrl, token: stored.trim(), tokenSource: 'storage' };
  return { wsUrl, token: null, tokenSource: 'none' };
}

export function browserSettings(): ConnectionSettings {
  let storage: Storage | null = null;
  try {
    storage = window.localStorage;
  } catch {
    storage = null;
  }
  return resolveSettings({
    injected: window.__ATRIUM__ ?? null,
    location: window.location,
    storage,
    replaceUrl: (url) => {
      try {
        window.history.replaceState(window.history.state, '', url);
      } catch {
        /* ignore */
      }
    },
  });
}

/** A random id per browser tab, kept in sessionStorage so a reload keeps it. */
export function instanceId(storage: Storage | null | undefined): string {
  const existing = safeGet(storage, INSTANCE_KEY);
  if (existing) return existing;
  const id = uuid();
  safeSet(storage, INSTANCE_KEY, id);
  return id;
}

export function saveToken(storage: Storage | null | undefined, token: string | null): void {
  safeSet(storage, TOKEN_KEY, token && token.trim() ? token.trim() : null);
}
