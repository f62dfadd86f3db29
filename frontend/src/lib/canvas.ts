// The Canvas (issue 23, SPEC §8): the one module through which the UI talks to the gateway about
// A2UI surfaces and presented pages. docs/PROTOCOL.md "Canvas and A2UI" is the contract.
//
// A CanvasView holds what a Canvas shows: an A2UI processor (lib/a2ui) and the presented page.
// The desktop app drives one from the gateway (connectCanvas: canvas.state at every connect,
// canvas.update events, each answered with canvas.rendered once the DOM shows it); the phone page
// drives one from node commands (canvasNodeHandlers: canvas.a2ui.push, .reset, canvas.present,
// .navigate, .hide, .eval). Both send a person's press as canvas.action and show the answer.
import { tick } from 'svelte';
import { get, writable, type Readable } from 'svelte/store';
import { createProcessor, type Processor } from './a2ui/model.svelte';
import type { LineError } from './a2ui/validate';
import { isUnknownMethod, toGatewayError, type GatewayClient } from './gateway';
import { CommandError, type CommandHandler } from './nodeserve';

/** Draws an element as a PNG: the base64 of its bytes (no data: prefix). */
export type Snapshotter = (el: HTMLElement) => Promise<string>;

/** The default Snapshotter: html-to-image (DOM → SVG foreignObject → canvas), loaded when first used. */
export const htmlToImage: Snapshotter = async (el) => {
  const { toPng } = await import('html-to-image');
  // The clone html-to-image draws keeps attributes, not live state: mirror checked boxes and
  // radios into the attribute for the moment of the drawing, then put it back.
  const mirrored: HTMLInputElement[] = [];
  for (const box of el.querySelectorAll<HTMLInputElement>('input[type="checkbox"], input[type="radio"]')) {
    if (box.checked && !box.hasAttribute('checked')) {
      box.setAttribute('checked', '');
      mirrored.push(box);
    }
  }
  let url: string;
  try {
    url = await toPng(el, { cacheBust: false, pixelRatio: 1, skipFonts: true });
  } finally {
    for (const box of mirrored) box.removeAttribute('checked');
  }
  const comma = url.indexOf(',');
  if (!url.startsWith('data:image/png;base64,') || comma < 0) throw new Error('the snapshot is not a PNG');
  return url.slice(comma + 1);
};

/** The reason a Canvas with only a presented page gives for canvas.snapshot (the frame is another origin). */
export const SNAPSHOT_PAGE_ONLY = 'a presented page cannot be drawn from the app (its frame is another origin); only A2UI surfaces can';

/** Where a presented page goes on the desktop (CSS pixels of the Canvas area); absent: fill it. */
export interface Placement {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** The presented page: an http(s) url straight from its origin, or frameUrl (the gateway's sandboxed copy of html). */
export interface Presented {
  /** What the iframe loads: frameUrl when the gateway serves the page, else url. */
  src: string;
  /** True when src is the gateway's served html (canvas.eval can reach it). */
  html: boolean;
  placement: Placement | null;
}

/** A person's press on a Button: what canvas.action sends. */
export interface CanvasAction {
  surfaceId: string;
  componentId: string;
  name: string;
  context: Record<string, unknown>;
  /** v0.9 sendDataModel: the surface's whole data model. */
  dataModel?: Record<string, unknown>;
}

/** canvas.action's answer. */
export interface ActionAck {
  accepted: boolean;
  actionId?: string;
  sessionKey?: string;
  queued?: boolean;
}

/** Longest eval wait (ms) when the request names none, and the most it may ask for (PROTOCOL). */
export const EVAL_DEFAULT_MS = 10_000;
export const EVAL_MAX_MS = 60_000;

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A presented page's source: http(s) URLs only (a gateway frameUrl may be relative to the page). */
export function frameSource(v: unknown, base: string): string | null {
  if (typeof v !== 'string' || v === '' || v.length > 4096) return null;
  try {
    const u = new URL(v, base);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
}

/** A placement with four finite numbers, width and height positive; else null (fill the area). */
export function parsePlacement(v: unknown): Placement | null {
  if (!isObject(v)) return null;
  const n = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : NaN);
  const p = { x: n(v.x), y: n(v.y), width: n(v.width), height: n(v.height) };
  if ([p.x, p.y, p.width, p.height].some(isNaN) || p.width <= 0 || p.height <= 0) return null;
  return p;
}

/** What a Canvas shows, and the bridge into its presented frame. */
export class CanvasView {
  readonly processor: Processor;
  private readonly _presented = writable<Presented | null>(null);
  readonly presented: Readable<Presented | null> = { subscribe: this._presented.subscribe };
  /** The problems of the last push or replay (line-numbered), for the panel to show. */
  private readonly _errors = writable<LineError[]>([]);
  readonly errors: Readable<LineError[]> = { subscribe: this._errors.subscribe };
  /** Bumped when a surface appears or a page is presented (the desktop brings the Canvas forward). */
  private readonly _attention = writable(0);
  readonly attention: Readable<number> = { subscribe: this._attention.subscribe };
  private frame: Window | null = null;
  private surfacesEl: HTMLElement | null = null;
  private readonly base: string;
  private readonly snapshotter: Snapshotter;

  /** base: what relative frame URLs resolve against (default the page's); snapshot: default htmlToImage. */
  constructor(opts: { processor?: Processor; base?: string; snapshot?: Snapshotter } = {}) {
    this.processor = opts.processor ?? createProcessor();
    this.base = opts.base ?? globalThis.location?.href ?? 'http://127.0.0.1/';
    this.snapshotter = opts.snapshot ?? htmlToImage;
  }

  /** The element that holds the surfaces (the panel sets it; canvas.snapshot draws it). */
  setSurfacesElement(el: HTMLElement | null): void {
    this.surfacesEl = el;
  }

  /**
   * The surfaces as a PNG (base64). Throws when nothing can be drawn: no surface (a presented page
   * alone cannot be: SNAPSHOT_PAGE_ONLY), or no panel mounted.
   */
  async snapshot(): Promise<string> {
    if (get(this.processor.surfaces).length === 0) throw new Error(get(this._presented) ? SNAPSHOT_PAGE_ONLY : 'the Canvas shows nothing to draw');
    if (!this.surfacesEl) throw new Error('the Canvas is not on screen here');
    await tick();
    return this.snapshotter(this.surfacesEl);
  }

  /** Applies A2UI lines and waits until the DOM shows them; returns the lines that failed. */
  async push(messages: unknown[], replay = false): Promise<LineError[]> {
    const before = new Set(get(this.processor.surfaces).map((s) => s.id));
    if (replay) this.processor.reset();
    const res = this.processor.apply(Array.isArray(messages) ? messages : []);
    this._errors.set(res.errors);
    // Attention only for a surface not shown before (a replay after a reconnect that brings the same ones does not call).
    if (get(this.processor.surfaces).some((s) => !before.has(s.id))) this._attention.update((n) => n + 1);
    await tick();
    return res.errors;
  }

  /** Removes the named surfaces (none named: all). */
  async reset(surfaces?: string[]): Promise<void> {
    if (!surfaces || surfaces.length === 0) this.processor.reset();
    else for (const id of surfaces) this.processor.reset(id);
    await tick();
  }

  /** Shows a page (frameUrl wins over url); throws CommandError INVALID_REQUEST for anything not http(s). */
  async present(p: Record<string, unknown>): Promise<void> {
    const frame = frameSource(p.frameUrl, this.base);
    const src = frame ?? frameSource(p.url, this.base);
    if (!src) throw new CommandError('INVALID_REQUEST', 'canvas.present needs an http(s) url or the gateway frameUrl');
    this._presented.set({ src, html: frame !== null, placement: parsePlacement(p.placement) });
    this._attention.update((n) => n + 1);
    await tick();
  }

  async navigate(url: unknown): Promise<void> {
    const src = frameSource(url, this.base);
    if (!src) throw new CommandError('INVALID_REQUEST', 'canvas.navigate needs an http(s) url');
    const cur = get(this._presented);
    this._presented.set({ src, html: false, placement: cur?.placement ?? null });
    await tick();
  }

  async hide(): Promise<void> {
    this._presented.set(null);
    this.frame = null;
    await tick();
  }

  /** The presented iframe's window (the panel sets it when the frame loads, null when it goes). */
  setFrame(w: Window | null): void {
    this.frame = w;
  }

  /**
   * Runs js in the presented html page (never in the app): postMessage {atrium:"canvas.eval", id, js}
   * to that frame and waits for {atrium:"canvas.eval.result", id, ok, value?, error?} from the same
   * frame, at most timeoutMs (EVAL_DEFAULT_MS, ≤ EVAL_MAX_MS).
   */
  evaluate(js: string, timeoutMs = EVAL_DEFAULT_MS): Promise<{ ok: boolean; value?: unknown; error?: string }> {
    const cur = get(this._presented);
    const frame = this.frame;
    if (!cur || !cur.html || !frame) return Promise.resolve({ ok: false, error: 'no html page is presented here' });
    const wait = Math.min(Math.max(1, timeoutMs), EVAL_MAX_MS);
    const id = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    return new Promise((resolve) => {
      const done = (r: { ok: boolean; value?: unknown; error?: string }) => {
        clearTimeout(timer);
        window.removeEventListener('message', onMessage);
        resolve(r);
      };
      const onMessage = (e: MessageEvent) => {
        if (e.source !== frame) return;
        const d = e.data;
        if (!isObject(d) || d.atrium !== 'canvas.eval.result' || d.id !== id) return;
        done(d.ok === true ? { ok: true, value: d.value } : { ok: false, error: typeof d.error === 'string' ? d.error.slice(0, 2000) : 'failed' });
      };
      const timer = setTimeout(() => done({ ok: false, error: `no answer from the page within ${wait} ms` }), wait);
      window.addEventListener('message', onMessage);
      // The frame is an opaque origin (sandbox without allow-same-origin): "*" is the only target that reaches it.
      frame.postMessage({ atrium: 'canvas.eval', id, js }, '*');
    });
  }
}

/** Sends a press as canvas.action (target: "desktop" or the node's own id). */
export async function sendAction(gw: GatewayClient, target: string, a: CanvasAction): Promise<ActionAck> {
  const params: Record<string, unknown> = { target, surfaceId: a.surfaceId, componentId: a.componentId, name: a.name, context: a.context };
  if (a.dataModel) params.dataModel = a.dataModel;
  return gw.request<ActionAck>('canvas.action', params);
}

/** Asks the gateway to close a surface of the desktop's Canvas (the gateway forgets it and tells every UI). */
export async function closeSurface(gw: GatewayClient, surfaceId: string): Promise<void> {
  await gw.request('canvas.a2ui.reset', { target: 'desktop', surfaceId });
}

/**
 * Closes a surface shown on this phone: the gateway forgets it (canvas.a2ui.reset, a node's own
 * target), so it stays closed when the page reconnects, and the page stops showing it. Without a
 * node connection the surface is hidden here and the error says why it may come back.
 */
export async function closeNodeSurface(gw: GatewayClient | null, view: CanvasView, surfaceId: string): Promise<void> {
  await view.reset([surfaceId]);
  if (!gw) throw new Error('not connected: the surface comes back when the page reconnects');
  await gw.request('canvas.a2ui.reset', { surfaceId });
}

/** Asks the gateway to close the desktop's presented page. */
export async function hidePage(gw: GatewayClient): Promise<void> {
  await gw.request('canvas.hide', { target: 'desktop' });
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Drives view from the gateway as the desktop's Canvas: canvas.state {target:"desktop"} on every
 * connect (the surfaces and page come back after a reload or a reconnect), canvas.update events
 * applied and each answered with canvas.rendered {pushId, ok, errors?|value?|error?} once the DOM
 * shows it. Returns the function that stops.
 */
export function connectCanvas(gw: GatewayClient, view: CanvasView): () => void {
  let stopped = false;
  async function loadState() {
    try {
      const st = await gw.request<Record<string, any>>('canvas.state', { target: 'desktop' });
      if (stopped) return;
      const surfaces = Array.isArray(st?.surfaces) ? st.surfaces : [];
      const lines: unknown[] = [];
      for (const s of surfaces) if (isObject(s) && Array.isArray(s.messages)) lines.push(...s.messages);
      await view.push(lines, true);
      if (isObject(st?.presented)) await view.present(st.presented).catch(() => view.hide());
      else await view.hide();
    } catch (e) {
      if (!isUnknownMethod(e)) console.warn('atrium canvas: canvas.state failed', toGatewayError(e).message);
    }
  }
  const answer = (params: Record<string, unknown>) =>
    gw.request('canvas.rendered', params).catch((e) => console.warn('atrium canvas: canvas.rendered not delivered', toGatewayError(e).message));

  async function onUpdate(p: any) {
    if (!isObject(p) || typeof p.pushId !== 'string' || (p.target !== undefined && p.target !== 'desktop')) return;
    const pushId = p.pushId;
    try {
      switch (p.op ?? 'push') {
        case 'push': {
          const errors = await view.push(Array.isArray(p.messages) ? p.messages : []);
          await answer(errors.length ? { pushId, ok: false, errors } : { pushId, ok: true });
          return;
        }
        case 'reset':
          await view.reset(Array.isArray(p.surfaces) ? p.surfaces.filter((x: unknown) => typeof x === 'string') : undefined);
          await answer({ pushId, ok: true });
          return;
        case 'present':
          await view.present(p);
          await answer({ pushId, ok: true });
          return;
        case 'navigate':
          await view.navigate(p.url);
          await answer({ pushId, ok: true });
          return;
        case 'hide':
          await view.hide();
          await answer({ pushId, ok: true });
          return;
        case 'eval': {
          const r = await view.evaluate(String(p.js ?? ''), typeof p.timeoutMs === 'number' ? p.timeoutMs : EVAL_DEFAULT_MS);
          await answer({ pushId, ...r });
          return;
        }
        case 'snapshot':
          await answer({ pushId, ok: true, pngBase64: await view.snapshot() });
          return;
        default:
          await answer({ pushId, ok: false, error: `unknown canvas.update op ${String(p.op).slice(0, 40)}` });
      }
    } catch (e) {
      await answer({ pushId, ok: false, error: errorMessage(e) });
    }
  }

  const offUpdate = gw.on('canvas.update', (p) => void onUpdate(p));
  let wasConnected = false;
  const offStatus = gw.status.subscribe((s) => {
    const now = s.state === 'connected';
    if (now && !wasConnected) void loadState();
    wasConnected = now;
  });
  return () => {
    stopped = true;
    offUpdate();
    offStatus();
  };
}

/**
 * The node commands of the phone page's Canvas (SPEC §7; PROTOCOL "Nodes"): canvas.a2ui.push
 * {pushId, messages, replay?} → {rendered: true} or {rendered: false, errors}; canvas.a2ui.reset
 * {surfaces?}; canvas.present {url?, frameUrl?, placement?}; canvas.navigate {url}; canvas.hide {};
 * canvas.eval {js, timeoutMs} → {ok, value?, error?}; canvas.snapshot {} → {mime: "image/png",
 * dataBase64} (UNAVAILABLE when nothing can be drawn).
 */
export function canvasNodeHandlers(view: CanvasView): Record<string, CommandHandler> {
  return {
    'canvas.a2ui.push': async (params) => {
      const errors = await view.push(Array.isArray(params.messages) ? params.messages : [], params.replay === true);
      return errors.length ? { rendered: false, errors } : { rendered: true };
    },
    'canvas.a2ui.reset': async (params) => {
      const list = Array.isArray(params.surfaces) ? params.surfaces.filter((x): x is string => typeof x === 'string') : typeof params.surfaceId === 'string' ? [params.surfaceId] : undefined;
      await view.reset(list);
      return { rendered: true };
    },
    'canvas.present': async (params) => {
      await view.present(params);
      return { rendered: true };
    },
    'canvas.navigate': async (params) => {
      await view.navigate(params.url);
      return { rendered: true };
    },
    'canvas.hide': async () => {
      await view.hide();
      return { rendered: true };
    },
    'canvas.snapshot': async () => {
      try {
        return { mime: 'image/png', dataBase64: await view.snapshot() };
      } catch (e) {
        throw new CommandError('UNAVAILABLE', errorMessage(e));
      }
    },
    'canvas.eval': async (params, timeoutMs) => {
      const want = typeof params.timeoutMs === 'number' ? params.timeoutMs : EVAL_DEFAULT_MS;
      return view.evaluate(String(params.js ?? ''), Math.min(want, Math.max(1000, timeoutMs - 500)));
    },
  };
}

/** The Canvas commands the phone page declares at connect. */
export const CANVAS_COMMANDS = ['canvas.a2ui.push', 'canvas.a2ui.reset', 'canvas.eval', 'canvas.hide', 'canvas.navigate', 'canvas.present', 'canvas.snapshot'] as const;
export const CANVAS_CAP = 'canvas';
