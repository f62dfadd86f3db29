// A scripted WebSocket for unit tests: records sent frames, lets the test play the server.
import type { WebSocketLike } from '../gateway';

export class FakeWebSocket implements WebSocketLike {
  static instances: FakeWebSocket[] = [];
  static reset(): void {
    FakeWebSocket.instances = [];
  }
  static last(): FakeWebSocket {
    const ws = FakeWebSocket.instances[FakeWebSocket.instances.length - 1];
    if (!ws) throw new Error('no FakeWebSocket was created');
    return ws;
  }

  readonly url: string;
  readyState = 0;
  sent: any[] = [];
  closedWith: { code?: number; reason?: string } | null = null;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;

  constructor(url: string) {
    this.url = url;
    FakeWebSocket.instances.push(this);
  }

  send(data: string): void {
    if (this.readyState !== 1) throw new Error('InvalidStateError: socket is not open');
    this.sent.push(JSON.parse(data));
  }

  close(code?: number, reason?: string): void {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }

  // ---- server side ----
  serverOpen(): void {
    this.readyState = 1;
    this.onopen?.({});
  }
  serverSend(frame: unknown): void {
    this.onmessage?.({ data: typeof frame === 'string' ? frame : JSON.stringify(frame) });
  }
  serverEvent(event: string, payload: unknown, seq = 1): void {
    this.serverSend({ type: 'event', event, payload, seq });
  }
  serverClose(code = 1006, reason = ''): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
  challenge(): void {
    this.serverEvent('connect.challenge', { nonce: 'n-1', ts: 1 });
  }
  /** The connect request the client sent, if any. */
  connectFrame(): any {
    return this.sent.find((f) => f.method === 'connect');
  }
  helloOk(policy: Record<string, unknown> = {}): void {
    const req = this.connectFrame();
    if (!req) throw new Error('client has not sent connect');
    this.serverSend({
      type: 'res',
      id: req.id,
      ok: true,
      payload: {
        type: 'hello-ok',
        protocol: 1,
        server: { version: 'test', connId: 'c1' },
        features: { methods: [], events: [] },
        snapshot: { presence: [], profiles: [] },
        policy: { maxPayload: 1 << 20, maxBufferedBytes: 1 << 20, tickIntervalMs: 30_000, ...policy },
      },
    });
  }
  /** Open, challenge and accept: the full handshake. */
  handshake(policy: Record<string, unknown> = {}): void {
    this.serverOpen();
    this.challenge();
    this.helloOk(policy);
  }
  /** Last request frame for a method. */
  lastRequest(method: string): any {
    const list = this.sent.filter((f) => f.method === method);
    return list[list.length - 1];
  }
  /** Answers every request for `method` not yet in `done` (adding it); returns how many. */
  answerAll(method: string, payload: unknown, done: Set<string>): number {
    let n = 0;
    for (const f of this.sent) {
      if (f.method === method && !done.has(f.id)) {
        done.add(f.id);
        this.reply(f, payload);
        n++;
      }
    }
    return n;
  }
  reply(req: { id: string }, payload: unknown): void {
    this.serverSend({ type: 'res', id: req.id, ok: true, payload });
  }
  fail(req: { id: string }, code: string, message: string, retryable = false): void {
    this.serverSend({ type: 'res', id: req.id, ok: false, error: { code, message, retryable } });
  }
}
