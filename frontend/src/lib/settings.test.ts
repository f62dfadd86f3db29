import { describe, expect, it, vi } from 'vitest';
import { DEFAULT_WS_URL, TOKEN_KEY, instanceId, resolveSettings, takeTokenFromHash, wsUrlFor } from './settings';

function memStorage(init: Record<string, string> = {}): Storage {
  const m = new Map(Object.entries(init));
  return {
    get length() {
      return m.size;
    },
    clear: () => m.clear(),
    getItem: (k) => (m.has(k) ? (m.get(k) as string) : null),
    key: (i) => [...m.keys()][i] ?? null,
    removeItem: (k) => void m.delete(k),
    setItem: (k, v) => void m.set(k, String(v)),
  };
}
const loc = (over: Partial<Location> = {}) => ({
  protocol: 'http:',
  host: '127.0.0.1:18789',
  pathname: '/',
  search: '',
  hash: '',
  ...over,
});

describe('settings', () => {
  it('derives ws(s)://host/ws from the page, falling back to the loopback gateway', () => {
    expect(wsUrlFor(loc())).toBe('ws://127.0.0.1:18789/ws');
    expect(wsUrlFor(loc({ protocol: 'https:', host: '192.168.1.5:18789' }))).toBe('wss://192.168.1.5:18789/ws');
    expect(wsUrlFor(loc({ protocol: 'wails:', host: 'wails' }))).toBe(DEFAULT_WS_URL);
  });

  it('prefers the injected settings', () => {
    const s = resolveSettings({
      injected: { wsUrl: 'ws://127.0.0.1:5555/ws', token: 'inj' },
      location: loc(),
      storage: memStorage({ [TOKEN_KEY]: 'old' }),
    });
    expect(s).toEqual({ wsUrl: 'ws://127.0.0.1:5555/ws', token: 'inj', tokenSource: 'injected' });
  });

  it('takes the token from #token=, stores it and removes it from the visible URL', () => {
    const storage = memStorage();
    const replaceUrl = vi.fn();
    const s = resolveSettings({ location: loc({ pathname: '/app/', search: '?x=1', hash: '#token=abc%2B1' }), storage, replaceUrl });
    expect(s).toMatchObject({ token: 'abc+1', tokenSource: 'fragment', wsUrl: 'ws://127.0.0.1:18789/ws' });
    expect(storage.getItem(TOKEN_KEY)).toBe('abc+1');
    expect(replaceUrl).toHaveBeenCalledWith('/app/?x=1');
  });

  it('keeps other fragment parameters', () => {
    expect(takeTokenFromHash('#tab=memory&token=t')).toEqual({ token: 't', rest: '#tab=memory' });
    expect(takeTokenFromHash('#tab=memory')).toEqual({ token: null, rest: '#tab=memory' });
    expect(takeTokenFromHash('')).toEqual({ token: null, rest: '' });
  });

  it('falls back to localStorage, then to no token', () => {
    const replaceUrl = vi.fn();
    expect(resolveSettings({ location: loc(), storage: memStorage({ [TOKEN_KEY]: 'kept' }), replaceUrl })).toMatchObject({
      token: 'kept',
      tokenSource: 'storage',
    });
    expect(resolveSettings({ location: loc(), storage: memStorage(), replaceUrl })).toMatchObject({ token: null, tokenSource: 'none' });
    expect(replaceUrl).not.toHaveBeenCalled();
  });

  it('keeps one instanceId per tab', () => {
    const ss = memStorage();
    const a = instanceId(ss);
    expect(a).toMatch(/^[0-9a-f-]{36}$/);
    expect(instanceId(ss)).toBe(a);
  });
});
