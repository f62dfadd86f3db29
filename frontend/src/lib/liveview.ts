// The desktop's live view player (issue 22 item 3; docs/PROTOCOL.md "Live view"): live.chunk events
// {viewId, seq, data (base64 WebM), ageMs?} appended in order to a Media Source Extensions
// SourceBuffer, the play head kept near the newest data, the latency figure measured.
//
// Latency of a chunk = ageMs (the gateway: node encoder → gateway, clock offset corrected) + this
// page's receipt → append + the playback buffer ahead of the play head once it is appended
// (buffered.end − currentTime): the delay of the chunk's newest frame from the node's encoder to the
// screen. Not counted: the gateway → page WebSocket hop, a frame's wait for its chunk (≤ timeslice).

/** The play head is moved to the newest data when it falls this far behind (s). */
export const MAX_BEHIND_S = 1.5;
/** …to this far before the newest data (s). */
export const CATCH_UP_S = 0.3;
/** Played data older than this is removed from the SourceBuffer (s). */
export const KEEP_S = 20;
/** Chunks waiting for their append above this many bytes end the player: the page cannot keep up. */
export const MAX_PENDING_BYTES = 16 << 20;
/** The latency shown is the median of the last this many chunks. */
export const LATENCY_WINDOW = 8;

export function b64Bytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** What the player needs of the page (tests pass fakes). */
export interface PlayerDeps {
  MediaSource: typeof MediaSource;
  createObjectURL: (o: MediaSource) => string;
  revokeObjectURL: (u: string) => void;
  now: () => number;
}

export const browserDeps = (): PlayerDeps => ({
  MediaSource: globalThis.MediaSource,
  createObjectURL: (o) => URL.createObjectURL(o),
  revokeObjectURL: (u) => URL.revokeObjectURL(u),
  now: () => performance.now(),
});

/** The mime type to play, or null when this browser's MSE takes none of it. */
export function playableType(ms: Pick<typeof MediaSource, 'isTypeSupported'> | undefined, mimeType: string): string | null {
  if (!ms) return null;
  for (const t of [mimeType, 'video/webm;codecs="vp8"', 'video/webm;codecs="vp9"', 'video/webm']) {
    if (t && ms.isTypeSupported(t)) return t;
  }
  return null;
}

type Media = Pick<HTMLVideoElement, 'src' | 'currentTime' | 'buffered' | 'play' | 'muted' | 'removeAttribute' | 'load'>;

/** Plays one live view in video. */
export class LivePlayer {
  private sb: SourceBuffer | null = null;
  private queue: { data: Uint8Array; at: number; ageMs: number | null }[] = [];
  private pendingBytes = 0;
  private url: string;
  private latencies: number[] = [];
  private closed = false;
  /** Chunks appended. */
  appended = 0;

  constructor(
    private video: Media,
    private type: string,
    private deps: PlayerDeps,
    /** The latency figure (ms) after each append; null until one is known. */
    private onLatency: (ms: number | null) => void,
    /** The player cannot go on (an append failed, too much waiting): the view should stop. */
    private onError: (msg: string) => void,
  ) {
    const ms = new deps.MediaSource();
    this.url = deps.createObjectURL(ms);
    video.muted = true;
    video.src = this.url;
    ms.addEventListener('sourceopen', () => {
      if (this.closed) return;
      try {
        this.sb = ms.addSourceBuffer(type);
      } catch (e) {
        onError(`this browser cannot play ${type}: ${e instanceof Error ? e.message : String(e)}`);
        return;
      }
      this.sb.addEventListener('updateend', () => this.updated());
      this.pump();
    });
  }

  /** Takes a chunk as live.chunk gave it (ageMs: the gateway's figure, absent before its clock is known). */
  push(data: Uint8Array, ageMs?: number | null): void {
    if (this.closed) return;
    this.queue.push({ data, at: this.deps.now(), ageMs: typeof ageMs === 'number' ? ageMs : null });
    this.pendingBytes += data.length;
    if (this.pendingBytes > MAX_PENDING_BYTES) {
      this.onError('the page cannot play the live view as fast as it arrives');
      this.close();
      return;
    }
    this.pump();
  }

  private current: { at: number; ageMs: number | null } | null = null;

  private pump(): void {
    const sb = this.sb;
    if (!sb || sb.updating || this.closed) return;
    const v = this.video;
    const b = v.buffered;
    // Played data goes, so the SourceBuffer stays small.
    if (b.length > 0 && v.currentTime - b.start(0) > 2 * KEEP_S) {
      this.current = null;
      sb.remove(0, v.currentTime - KEEP_S);
      return;
    }
    const next = this.queue.shift();
    if (!next) return;
    this.pendingBytes -= next.data.length;
    this.current = next;
    try {
      sb.appendBuffer(next.data as Uint8Array<ArrayBuffer>);
    } catch (e) {
      this.onError(`the live view could not be played: ${e instanceof Error ? e.message : String(e)}`);
      this.close();
    }
  }

  private updated(): void {
    const v = this.video;
    const b = v.buffered;
    const cur = this.current;
    this.current = null;
    if (cur && b.length > 0) {
      this.appended++;
      const end = b.end(b.length - 1);
      if (end - v.currentTime > MAX_BEHIND_S || v.currentTime < b.start(b.length - 1)) v.currentTime = Math.max(b.start(b.length - 1), end - CATCH_UP_S);
      if (this.appended === 1 || (v as HTMLVideoElement).paused) void v.play().catch(() => undefined);
      if (cur.ageMs !== null) {
        const ahead = Math.max(0, end - v.currentTime) * 1000;
        this.latencies = [...this.latencies.slice(-(LATENCY_WINDOW - 1)), cur.ageMs + (this.deps.now() - cur.at) + ahead];
        this.onLatency(median(this.latencies));
      }
    }
    this.pump();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.deps.revokeObjectURL(this.url);
    this.video.removeAttribute('src');
    this.video.load();
  }
}

/** Routes live.chunk events to players by viewId; chunks of a view not yet known are kept (live.open's answer may come after its first chunks). */
export class LiveRouter {
  private players = new Map<string, LivePlayer>();
  private early = new Map<string, { data: Uint8Array; ageMs?: number }[]>();

  /** Takes a live.chunk payload. */
  chunk(p: { viewId?: unknown; data?: unknown; ageMs?: unknown }): void {
    if (typeof p?.viewId !== 'string' || typeof p.data !== 'string') return;
    const c = { data: b64Bytes(p.data), ageMs: typeof p.ageMs === 'number' ? p.ageMs : undefined };
    const pl = this.players.get(p.viewId);
    if (pl) {
      pl.push(c.data, c.ageMs);
      return;
    }
    const list = this.early.get(p.viewId) ?? [];
    if (list.length < 64) list.push(c); // bounded: a view nobody here opened does not grow it
    this.early.set(p.viewId, list);
    if (this.early.size > 8) this.early.delete(this.early.keys().next().value as string);
  }

  /** Plays viewId in player, the chunks that came before first. */
  attach(viewId: string, player: LivePlayer): void {
    this.players.set(viewId, player);
    for (const c of this.early.get(viewId) ?? []) player.push(c.data, c.ageMs);
    this.early.delete(viewId);
  }

  detach(viewId: string): void {
    this.players.get(viewId)?.close();
    this.players.delete(viewId);
    this.early.delete(viewId);
  }
}

/** The sources a node offers for a live view: its camera.live / screen.live commands (approved at pairing). */
export function liveSources(n: { commands: string[] }): ('camera' | 'screen')[] {
  const out: ('camera' | 'screen')[] = [];
  if (n.commands.includes('camera.live')) out.push('camera');
  if (n.commands.includes('screen.live')) out.push('screen');
  return out;
}
