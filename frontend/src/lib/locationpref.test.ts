import { describe, expect, it } from 'vitest';
import { LOCATION_KEY, loadLocationMode, locationAccess, saveLocationMode } from './locationpref';

function memStorage(init: Record<string, string> = {}) {
  const m = new Map(Object.entries(init));
  return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, v), m };
}

describe('the phone page Location setting', () => {
  it('is off until the person turns it on, and kept', () => {
    const s = memStorage();
    expect(loadLocationMode(s)).toBe('off');
    expect(loadLocationMode(undefined)).toBe('off');
    expect(loadLocationMode(memStorage({ [LOCATION_KEY]: 'always' }))).toBe('off'); // an unknown value is off
    expect(saveLocationMode(s, 'while-using')).toBe(true);
    expect(loadLocationMode(s)).toBe('while-using');
    saveLocationMode(s, 'off');
    expect(loadLocationMode(s)).toBe('off');
  });

  it('a browser that refuses storage: off to start, and the save says it did not last', () => {
    const throwing = {
      getItem: () => {
        throw new Error('SecurityError');
      },
      setItem: () => {
        throw new Error('QuotaExceededError');
      },
    };
    expect(loadLocationMode(throwing)).toBe('off');
    expect(saveLocationMode(throwing, 'while-using')).toBe(false);
  });

  it('answers only while on and the page is shown', () => {
    expect(locationAccess('off', false)).toBe('off');
    expect(locationAccess('off', true)).toBe('off');
    expect(locationAccess('while-using', false)).toBe('on');
    expect(locationAccess('while-using', true)).toBe('background');
  });
});
