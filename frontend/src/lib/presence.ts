// presence.update from the phone page (issue 21 item 7): `lastInputSeconds`, the seconds since the
// person last touched or typed on this page, for the desktop's presence list. The page sees only its
// own input: a touch, a key, a scroll wheel, and the page becoming visible (which takes the person's
// hand) count; while it is hidden nothing is seen, so the value reported when it was hidden stands,
// at that entry's `ts`. Until the first input the page reports nothing (an honest "unknown").
import type { GatewayClient } from './gateway';

/** Reports at most once per this many ms of input: the first at once, the last one of a window at its end. */
export const INPUT_THROTTLE_MS = 15_000;

export interface InputReporterOptions {
  /** Sends one report (seconds ≥ 0) to every open connection. */
  send: (lastInputSeconds: number) => void;
  throttleMs?: number;
  now?: () => number;
}

export class InputReporter {
  private readonly send: (s: number) => void;
  private readonly throttleMs: number;
  private readonly now: () => number;
  private lastInput: number | null = null;
  private lastSent = Number.NEGATIVE_INFINITY;
  private trailing: ReturnType<typeof setTimeout> | null = null;

  constructor(o: InputReporterOptions) {
    this.send = o.send;
    this.throttleMs = o.throttleMs ?? INPUT_THROTTLE_MS;
    this.now = o.now ?? Date.now;
  }

  /** Seconds since the last input, or null before any. */
  seconds(): number | null {
    return this.lastInput === null ? null : Math.max(0, (this.now() - this.lastInput) / 1000);
  }

  /** The person gave input now: report it, at most once per throttle window. */
  input(): void {
    this.lastInput = this.now();
    const wait = this.lastSent + this.throttleMs - this.lastInput;
    if (wait <= 0) {
      this.report();
    } else if (!this.trailing) {
      this.trailing = setTimeout(() => {
        this.trailing = null;
        this.report();
      }, wait);
    }
  }

  /** The page was shown (input: the person brought it up) or hidden (report what is known now, at once). */
  visibility(visible: boolean): void {
    if (visible) {
      this.input();
      return;
    }
    this.report();
  }

  /** Reports the current value now (e.g. to a connection that just opened); nothing before any input. */
  report(): void {
    const s = this.seconds();
    if (s === null) return;
    if (this.trailing) {
      clearTimeout(this.trailing);
      this.trailing = null;
    }
    this.lastSent = this.now();
    this.send(s);
  }

  /** Listens to the page's input and visibility; returns the function that stops listening and reporting. */
  attach(win: Pick<Window, 'addEventListener' | 'removeEventListener'>, doc: Pick<Document, 'addEventListener' | 'removeEventListener' | 'visibilityState'>): () => void {
    const onInput = () => this.input();
    const onVisibility = () => this.visibility(doc.visibilityState === 'visible');
    const kinds = ['pointerdown', 'keydown', 'touchstart', 'wheel'] as const;
    for (const k of kinds) win.addEventListener(k, onInput, { passive: true, capture: true });
    doc.addEventListener('visibilitychange', onVisibility);
    return () => {
      for (const k of kinds) win.removeEventListener(k, onInput, { capture: true });
      doc.removeEventListener('visibilitychange', onVisibility);
      if (this.trailing) clearTimeout(this.trailing);
      this.trailing = null;
    };
  }
}

/** Sends presence.update {lastInputSeconds} on gw while it is connected (a failure is only logged). */
export function sendInput(gw: GatewayClient, lastInputSeconds: number): void {
  if (gw.state.state !== 'connected') return;
  gw.request('presence.update', { lastInputSeconds }).catch((e) => console.warn('atrium: presence.update not delivered', e));
}

/**
 * The phone page's presence reports: input on the page goes to every open role connection of the
 * phone (operator, node; each has its presence entry), and a connection that (re)connects gets the
 * current value. onConn is PhoneSession.onConn. Returns the function that stops it.
 */
export function reportPhonePresence(
  onConn: (f: (role: string, gw: GatewayClient | null) => void) => () => void,
  win: Pick<Window, 'addEventListener' | 'removeEventListener'>,
  doc: Pick<Document, 'addEventListener' | 'removeEventListener' | 'visibilityState'>,
  o: Omit<InputReporterOptions, 'send'> = {},
): () => void {
  const conns = new Map<string, { gw: GatewayClient; off: () => void }>();
  const reporter = new InputReporter({ ...o, send: (s) => conns.forEach((c) => sendInput(c.gw, s)) });
  const detach = reporter.attach(win, doc);
  const drop = (role: string) => {
    conns.get(role)?.off();
    conns.delete(role);
  };
  const off = onConn((role, gw) => {
    drop(role);
    if (!gw) return;
    let was = gw.state.state;
    const unsub = gw.status.subscribe((s) => {
      if (s.state === 'connected' && was !== 'connected') {
        const v = reporter.seconds();
        if (v !== null) sendInput(gw, v);
      }
      was = s.state;
    });
    conns.set(role, { gw, off: unsub });
  });
  return () => {
    off();
    detach();
    for (const role of [...conns.keys()]) drop(role);
  };
}
