// The phone page's Location setting (issue 22 item 5; the seed: "默认关闭（隐私优先）… Off / While
// Using"): off until the person turns it on on this device; then location.get is answered only while
// the page is in use (shown). Kept in the browser's localStorage, so it stays through reloads; a
// browser that refuses storage keeps it for the page's life only.
import type { LocationAccess } from './nodeserve';

export type LocationMode = 'off' | 'while-using';
export const LOCATION_MODES: readonly LocationMode[] = ['off', 'while-using'];
/** The localStorage key of the setting. */
export const LOCATION_KEY = 'atrium.phone.location';

/** The saved setting; 'off' when none was saved, or the value or the storage is unusable. */
export function loadLocationMode(storage: Pick<Storage, 'getItem'> | undefined): LocationMode {
  try {
    return storage?.getItem(LOCATION_KEY) === 'while-using' ? 'while-using' : 'off';
  } catch {
    return 'off';
  }
}

/** Saves the setting; false when the browser refused (it then lasts until the page closes). */
export function saveLocationMode(storage: Pick<Storage, 'setItem'> | undefined, mode: LocationMode): boolean {
  try {
    storage?.setItem(LOCATION_KEY, mode);
    return storage !== undefined;
  } catch {
    return false;
  }
}

/** What locationHandler may do now, from the setting and whether the page is hidden. */
export function locationAccess(mode: LocationMode, hidden: boolean): LocationAccess {
  if (mode === 'off') return 'off';
  return hidden ? 'background' : 'on';
}
