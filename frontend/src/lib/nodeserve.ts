// The phone page as a node (issue 16 item 8): it answers `node.invoke.request {id, command, params,
// timeoutMs}` events with `node.invoke.result {id, ok, payload?, error?}` on its node connection.
// Commands: location.get (navigator.geolocation), system.notify (the Notification API where
// the person allowed it, else a notice in the page), camera.list, camera.snap and camera.clip
// (camera.ts), screen.snapshot and screen.record where the browser can capture the screen
// (screen.ts): the file goes as a media transfer, the result names it; camera.live and screen.live
// (livesend.ts) stream to the desktop's live view; canvas.a2ui.push, .reset,
// canvas.present, .navigate, .hide, .eval and .snapshot (canvas.ts: the page's Canvas shows the surfaces).
import type { GatewayClient } from './gateway';

export const PHONE_CAPS = ['camera', 'canvas', 'location', 'system'] as const;
/** The Canvas commands are served by lib/canvas.ts canvasNodeHandlers (issue 23). */
export const PHONE_COMMANDS = [
  'camera.clip',
  'camera.list',
  'camera.live',
  'camera.snap',
  'canvas.a2ui.push',
  'canvas.a2ui.reset',
  'canvas.eval',
  'canvas.hide',
  'canvas.navigate',
  'canvas.present',
  'canvas.snapshot',
  'location.get',
  'system.notify',
] as const;
/** What the page adds where the browser can capture the screen (screen.ts screenCaptureAvailable). */
export const SCREEN_CAP = 'screen';
export const PHONE_SCREEN_COMMANDS = ['screen.live', 'screen.record', 'screen.snapshot'] as const;

/** The caps and commands the page declares at connect: the screen ones only where the browser can capture it. */
export function phoneDeclares(screen: boolean): { caps: string[]; commands: string[] } {
  return {
    caps: screen ? [...PHONE_CAPS, SCREEN_CAP].sort() : [...PHONE_CAPS],
    commands: screen ? [...PHONE_COMMANDS, ...PHONE_SCREEN_COMMANDS].sort() : [...PHONE_COMMANDS],
  };
}
/** At most this many requests run at once; one more is answered at once UNAVAILABLE, retryable (node busy). */
export const MAX_RUNNING = 8;

/** A command's failure, sent back as node.invoke.result.error. */
export class CommandError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'CommandError';
    this.code = code;
  }
}

/** A handler's answer whose file went as a media transfer: node.invoke.result {payload, media:{id, transport}}. */
export class MediaResult {
  constructor(
    readonly payload: unknown,
    readonly media: { id: string; transport: 'webrtc' | 'https' },
  ) {}
}

export type CommandHandler = (params: Record<string, unknown>, timeoutMs: number) => Promise<unknown>;

/** location.get's payload (units in the names; absent values are null, as the Geolocation API gives them). */
export interface LocationPayload {
  latitude: number;
  longitude: number;
  accuracyMeters: number;
  altitudeMeters: number | null;
  headingDegrees: number | null;
  speedMps: number | null;
  /** When the position was taken, Unix ms. */
  timestamp: number;
}

/**
 * Whether the person lets the page answer location.get now (the phone page's Location setting, off
 * until the person turns it on, as the seed says): 'on'; 'off' (the setting); 'background' (on while
 * the page is in use, and it is hidden now).
 */
export type LocationAccess = 'on' | 'off' | 'background';

/** Coarse positions are rounded to this many decimal places of a degree (0.01° ≈ 1.1 km). */
export const COARSE_DECIMALS = 2;
/** A coarse position's accuracy is at least this (metres): what the rounding may move it. */
export const COARSE_ACCURACY_METERS = 1100;

/**
 * location.get {accuracy?: 'coarse'|'balanced'|'precise', highAccuracy?, maxAgeMs?} → LocationPayload,
 * through navigator.geolocation, only while access() is 'on': 'off' is FORBIDDEN, 'background'
 * NODE_BACKGROUND_UNAVAILABLE (both say what the person can do). precise asks for a GPS fix
 * (highAccuracy); coarse rounds the position to COARSE_DECIMALS and leaves out altitude, heading and speed.
 */
export function locationHandler(geo: Geolocation | undefined, access: () => LocationAccess): CommandHandler {
  return (params, timeoutMs) =>
    new Promise((resolve, reject) => {
      const now = access();
      if (now === 'off') {
        reject(new CommandError('FORBIDDEN', 'location is off on this device: its person can turn it on in the phone page (Location: while this page is in use)'));
        return;
      }
      if (now === 'background') {
        reject(new CommandError('NODE_BACKGROUND_UNAVAILABLE', 'location is on only while the phone page is in use, and it is in the background now: open it on the device'));
        return;
      }
      if (!geo) {
        reject(new CommandError('UNAVAILABLE', 'this browser has no geolocation'));
        return;
      }
      const coarse = params.accuracy === 'coarse';
      const high = params.accuracy === 'precise' || (params.accuracy !== 'coarse' && params.highAccuracy === true);
      const maxAge = typeof params.maxAgeMs === 'number' && params.maxAgeMs >= 0 ? params.maxAgeMs : 0;
      const round = (deg: number) => Number(deg.toFixed(COARSE_DECIMALS));
      geo.getCurrentPosition(
        (pos) =>
          resolve(
            coarse
              ? ({
                  latitude: round(pos.coords.latitude),
                  longitude: round(pos.coords.longitude),
                  accuracyMeters: Math.max(pos.coords.accuracy, COARSE_ACCURACY_METERS),
                  altitudeMeters: null,
                  headingDegrees: null,
                  speedMps: null,
                  timestamp: pos.timestamp,
                } satisfies LocationPayload)
              : ({
                  latitude: pos.coords.latitude,
                  longitude: pos.coords.longitude,
                  accuracyMeters: pos.coords.accuracy,
                  altitudeMeters: pos.coords.altitude ?? null,
                  headingDegrees: pos.coords.heading ?? null,
                  speedMps: pos.coords.speed ?? null,
                  timestamp: pos.timestamp,
                } satisfies LocationPayload),
          ),
        (err) => {
          // GeolocationPositionError: 1 PERMISSION_DENIED, 2 POSITION_UNAVAILABLE, 3 TIMEOUT.
          const code = err.code === 1 ? 'FORBIDDEN' : err.code === 3 ? 'TIMEOUT' : 'UNAVAILABLE';
          reject(new CommandError(code, `location: ${err.message || code}`));
        },
        { enableHighAccuracy: high, maximumAge: maxAge, timeout: Math.max(1000, timeoutMs - 500) },
      );
    });
}

/** Shows a notice in the page (the fallback of system.notify). */
export type PageNotice = (title: string, body: string) => void;

/** system.notify {title, body} → {delivered: true, via: "notification"|"page"}. */
export function notifyHandler(pageNotice: PageNotice, NotificationCtor: typeof Notification | undefined = globalThis.Notification): CommandHandler {
  return async (params) => {
    const title = typeof params.title === 'string' ? params.title.slice(0, 200) : '';
    const body = typeof params.body === 'string' ? params.body.slice(0, 2000) : '';
    if (!title && !body) throw new CommandError('INVALID_REQUEST', 'system.notify needs a title or a body');
    if (NotificationCtor && NotificationCtor.permission === 'granted') {
      try {
        new NotificationCtor(title || 'Atrium', { body });
        pageNotice(title, body); // also in the page: the person looking at it sees it there
        return { delivered: true, via: 'notification' };
      } catch {
        /* some mobile browsers only notify from a service worker: fall back to the page */
      }
    }
    pageNotice(title, body);
    return { delivered: true, via: 'page' };
  };
}

/** What serveNode reports for each request (the page lists the last few). */
export interface InvokeRecord {
  id: string;
  command: string;
  ok: boolean;
  at: number;
  error?: string;
  /** The page's own words for the failure (an i18n key), when the handler gave one. */
  hint?: string;
  /** The payload of a successful answer. */
  payload?: unknown;
}

/**
 * Serves handlers on gw: every node.invoke.request gets exactly one node.invoke.result. An unknown
 * command is answered INVALID_REQUEST (the gateway already refuses commands that were not approved).
 * At most maxRunning (MAX_RUNNING) run at once: a request beyond that is answered at once with
 * {code: UNAVAILABLE, retryable: true}, which the gateway turns into node.invoke's UNAVAILABLE (the
 * caller retries; nothing waits on the phone). Returns the function that stops serving.
 */
export function serveNode(
  gw: GatewayClient,
  handlers: Record<string, CommandHandler>,
  onInvoke?: (r: InvokeRecord) => void,
  maxRunning = MAX_RUNNING,
): () => void {
  let running = 0;
  return gw.on('node.invoke.request', (p) => {
    const id = typeof p?.id === 'string' ? p.id : '';
    const command = typeof p?.command === 'string' ? p.command : '';
    if (!id) return;
    const params = p?.params && typeof p.params === 'object' && !Array.isArray(p.params) ? (p.params as Record<string, unknown>) : {};
    const timeoutMs = typeof p?.timeoutMs === 'number' && p.timeoutMs > 0 ? p.timeoutMs : 30_000;
    if (running >= maxRunning) {
      const error = { code: 'UNAVAILABLE', message: `node busy: ${maxRunning} commands running, try again later`, retryable: true };
      onInvoke?.({ id, command, ok: false, at: Date.now(), error: error.message });
      gw.request('node.invoke.result', { id, ok: false, error }).catch((e) => console.warn('atrium node: result not delivered', e));
      return;
    }
    running++;
    const handler = Object.prototype.hasOwnProperty.call(handlers, command) ? handlers[command] : undefined;
    let run: Promise<unknown>;
    try {
      run = handler ? handler(params, timeoutMs) : Promise.reject(new CommandError('INVALID_REQUEST', `this node has no command ${command}`));
    } catch (e) {
      run = Promise.reject(e);
    }
    run
      .finally(() => running--)
      .then(
        (out) =>
          out instanceof MediaResult
            ? { id, ok: true, payload: out.payload ?? {}, media: out.media }
            : { id, ok: true, payload: out ?? {} },
        (e) => ({
          id,
          ok: false,
          error: { code: e instanceof CommandError ? e.code : 'INTERNAL', message: e instanceof Error ? e.message : String(e) },
          hint: typeof (e as { hint?: unknown })?.hint === 'string' ? (e as { hint: string }).hint : undefined,
        }),
      )
      .then(({ hint, ...res }: { id: string; ok: boolean; payload?: unknown; media?: unknown; error?: { code: string; message: string }; hint?: string }) => {
        onInvoke?.({ id, command, ok: res.ok, at: Date.now(), error: res.error?.message, hint, payload: res.payload });
        return gw.request('node.invoke.result', res).catch((e) => console.warn('atrium node: result not delivered', e));
      });
  });
}
