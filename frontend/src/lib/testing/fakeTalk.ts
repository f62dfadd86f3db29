// A browser's parts for a talk (RTCPeerConnection, its data channel, MediaRecorder), scripted for
// unit tests: the channel opens once the answer is set, a recorder's data comes when the test says.
// The live view's tests (livesend.test.ts) use the connection and channel too.
export class FakeChannel {
  readyState = 'connecting';
  binaryType = '';
  bufferedAmount = 0;
  sent: Uint8Array[] = [];
  onopen: (() => void) | null = null;
  onclose: (() => void) | null = null;
  onmessage: ((e: { data: ArrayBuffer }) => void) | null = null;
  constructor(readonly label: string) {}
  send(m: Uint8Array) {
    this.sent.push(m.slice());
  }
  open() {
    this.readyState = 'open';
    this.onopen?.();
  }
  /** The first byte of each message sent, as letters (the channel's message types). */
  types() {
    return this.sent.map((m) => String.fromCharCode(m[0])).join('');
  }
}
export class FakePC {
  static last: FakePC;
  dc!: FakeChannel;
  iceGatheringState = 'complete';
  connectionState = 'new';
  localDescription: { sdp: string } | null = null;
  remote = '';
  closed = false;
  onconnectionstatechange: (() => void) | null = null;
  constructor() {
    FakePC.last = this;
  }
  createDataChannel(label: string) {
    this.dc = new FakeChannel(label);
    return this.dc;
  }
  async createOffer() {
    return { type: 'offer', sdp: 'v=0 offer' };
  }
  async setLocalDescription(d: { sdp: string }) {
    this.localDescription = d;
  }
  async setRemoteDescription(d: { sdp: string }) {
    this.remote = d.sdp;
    queueMicrotask(() => this.dc.open());
  }
  addEventListener() {}
  close() {
    this.closed = true;
    if (this.dc) this.dc.readyState = 'closed';
  }
}
export class FakeRecorder {
  static isTypeSupported = (t: string) => t.startsWith('audio/webm');
  static all: FakeRecorder[] = [];
  state = 'inactive';
  ondataavailable: ((e: { data: Blob }) => void) | null = null;
  onerror: (() => void) | null = null;
  private stopFns: (() => void)[] = [];
  constructor(
    readonly stream: unknown,
    readonly opts: { mimeType: string },
  ) {
    FakeRecorder.all.push(this);
  }
  start() {
    this.state = 'recording';
  }
  data(bytes: number[]) {
    this.ondataavailable?.({ data: new Blob([new Uint8Array(bytes)]) });
  }
  stop() {
    this.state = 'inactive';
    this.data([9]);
    for (const f of this.stopFns) f();
  }
  addEventListener(_: string, f: () => void) {
    this.stopFns.push(f);
  }
}
