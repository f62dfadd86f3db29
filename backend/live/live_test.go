package live

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
)

const testToken = "test-operator-token-0123456789abcdef"

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeConn is the node's live connection as the service sees it: the test
// plays the node by calling hooks, and reads what the gateway sent.
type fakeConn struct {
	hooks Hooks
	peer  net.IP
	mu    sync.Mutex
	sent  [][]byte
	shut  chan struct{}
	once  sync.Once
}

func (c *fakeConn) Send(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, append([]byte(nil), b...))
	return nil
}

func (c *fakeConn) Close() {
	first := false
	c.once.Do(func() { close(c.shut); first = true })
	if first && c.hooks.Closed != nil { // like rtc.Stream: once, and re-entrant
		c.hooks.Closed()
	}
}

// sentOf returns the messages of type typ the gateway sent.
func (c *fakeConn) sentOf(typ byte) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]byte
	for _, m := range c.sent {
		if m[0] == typ {
			out = append(out, m)
		}
	}
	return out
}

type fixture struct {
	t     *testing.T
	gw    *gateway.Server
	nodes *nodes.Service
	live  *Service
	store *media.Store
	al    *audit.Log
	url   string
	conns chan *fakeConn
}

func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	f := &fixture{t: t, conns: make(chan *fakeConn, 8)}
	var err error
	if f.al, err = audit.New(audit.Options{Dir: filepath.Join(t.TempDir(), "audit"), Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	if f.store, err = media.Open(filepath.Join(t.TempDir(), "media"), media.Options{MinFree: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.store.Close() })
	f.gw, err = gateway.New(gateway.Options{Addr: "127.0.0.1:0", Token: testToken, Logger: quiet(),
		OnAuthenticated: func(ci gateway.ConnInfo) { f.nodes.Connected(ci) },
		OnClosed: func(ci gateway.ConnInfo) {
			f.nodes.Disconnected(ci)
			f.live.Disconnected(ci)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if f.nodes, err = nodes.New(nodes.Options{Gateway: f.gw, Audit: f.al, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	f.nodes.Register()
	o.Gateway, o.Nodes, o.Store, o.Audit, o.Logger = f.gw, f.nodes, f.store, f.al, quiet()
	o.Accept = func(ctx context.Context, peer net.IP, sdp string, h Hooks) (Conn, string, error) {
		if !strings.HasPrefix(sdp, "v=0") {
			return nil, "", ErrOffer
		}
		c := &fakeConn{hooks: h, peer: peer, shut: make(chan struct{})}
		f.conns <- c
		return c, "v=0 answer", nil
	}
	if f.live, err = New(o); err != nil {
		t.Fatal(err)
	}
	f.live.Register()
	if err := f.gw.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.gw.Run(ctx) }()
	t.Cleanup(func() {
		f.live.Close()
		cancel()
		<-done
	})
	f.url = "ws://" + f.gw.Addr() + "/ws"
	return f
}

func (f *fixture) dial(o gateway.ClientOptions) *gateway.Client {
	f.t.Helper()
	o.URL, o.Token = f.url, testToken
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := gateway.Dial(ctx, o)
	if err != nil {
		f.t.Fatalf("dial: %v", err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

func (f *fixture) operator() *gateway.Client {
	return f.dial(gateway.ClientOptions{Client: gateway.ClientInfo{ID: "test-ui", InstanceID: "ui-" + time.Now().Format("150405.000000000"), Mode: "ui", Platform: "linux"}})
}

// node connects as a local node that runs camera.live: it offers with
// sdp (answering the invoke ok) or, with sdp "", refuses the command.
type testNode struct {
	c  *gateway.Client
	id string
}

func (f *fixture) node(name string, sdp string) *testNode {
	c := f.dial(gateway.ClientOptions{Role: gateway.RoleNode, Caps: []string{"camera"}, Commands: []string{CommandCamera, CommandScreen},
		Client: gateway.ClientInfo{ID: "atrium-node", DisplayName: name, InstanceID: "inst-" + name, Mode: "node", Platform: "linux", Version: "test"}})
	n := &testNode{c: c, id: "local:" + c.Hello().Server.ConnID}
	go func() {
		for ev := range c.Events() {
			if ev.Event != nodes.EventInvokeRequest {
				continue
			}
			var r nodes.InvokeRequestEvent
			var p nodeParams
			if json.Unmarshal(ev.Payload, &r) != nil || json.Unmarshal(r.Params, &p) != nil {
				continue
			}
			res := nodes.ResultParams{ID: r.ID}
			if sdp == "" {
				res.Error = &nodes.NodeError{Code: "NODE_BACKGROUND_UNAVAILABLE", Message: "the page is in the background"}
			} else if err := c.Call(context.Background(), MethodOffer, map[string]string{"viewId": p.ViewID, "sdp": sdp}, nil); err != nil {
				res.Error = &nodes.NodeError{Code: "UNAVAILABLE", Message: err.Error()}
			} else {
				res.OK, res.Payload = true, json.RawMessage(`{"mimeType":"video/webm;codecs=vp8","width":640,"height":480}`)
			}
			_ = c.Call(context.Background(), nodes.MethodInvokeResult, res, nil)
		}
	}()
	return n
}

func call(c *gateway.Client, method string, params, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.Call(ctx, method, params, out)
}

func wantCode(t *testing.T, err error, code, part string) {
	t.Helper()
	var ge *gateway.Error
	if !errors.As(err, &ge) || ge.Code != code || !strings.Contains(ge.Message, part) {
		t.Fatalf("error %v, want %s containing %q", err, code, part)
	}
}

// nextEvent waits (bounded) for the next event named name.
func nextEvent(t *testing.T, c *gateway.Client, name string) json.RawMessage {
	t.Helper()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed while waiting for %s", name)
			}
			if ev.Event == name {
				return ev.Payload
			}
		case <-timeout.C:
			t.Fatalf("no %s event", name)
		}
	}
}

func chunkMsg(seq uint32, captured float64, data []byte) []byte {
	b := make([]byte, chunkHeader, chunkHeader+len(data))
	b[0] = msgChunk
	binary.BigEndian.PutUint32(b[1:], seq)
	binary.BigEndian.PutUint64(b[5:], math.Float64bits(captured))
	return append(b, data...)
}

func (f *fixture) open(op *gateway.Client, nodeID string) (OpenResult, *fakeConn) {
	f.t.Helper()
	var r OpenResult
	if err := call(op, MethodOpen, map[string]any{"nodeId": nodeID, "source": "camera"}, &r); err != nil {
		f.t.Fatalf("live.open: %v", err)
	}
	select {
	case c := <-f.conns:
		return r, c
	case <-time.After(60 * time.Second):
		f.t.Fatal("no live connection")
	}
	return r, nil
}

// TestLiveView: a view opens through the node's command and offer, its
// chunks reach the viewer in order with an age once the clock is known,
// live.save stores a WebM from a keyframe that ffprobe accepts, live.stop
// tells the node and the viewer.
func TestLiveView(t *testing.T) {
	f := newFixture(t, Options{PingInterval: 20 * time.Millisecond})
	op := f.operator()
	n := f.node("phone", "v=0 offer")
	r, conn := f.open(op, n.id)
	if r.ViewID == "" || r.MimeType != "video/webm;codecs=vp8" || r.Width != 640 || r.NodeID != n.id {
		t.Fatalf("live.open: %+v", r)
	}
	if !conn.peer.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("the node's candidates are not bound to its WebSocket's address: %v", conn.peer)
	}
	// The node answers the gateway's clock pings (its clock 5 s ahead).
	deadline := time.Now().Add(60 * time.Second)
	for len(conn.sentOf(msgPing)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no ping")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ping pingMsg
	_ = json.Unmarshal(conn.sentOf(msgPing)[0][1:], &ping)
	conn.hooks.Message(jsonMsg(msgPong, pongMsg{T: ping.T, N: unixMs(time.Now()) + 5000}))

	src := chromiumWebM(t)
	sent := 0
	for seq := uint32(0); sent < len(src); seq++ {
		n := min(12000, len(src)-sent)
		conn.hooks.Message(chunkMsg(seq, unixMs(time.Now())+5000, src[sent:sent+n]))
		sent += n
	}
	var got []byte
	for seq := uint32(0); len(got) < len(src); seq++ {
		var ev struct {
			ViewID string   `json:"viewId"`
			Seq    uint32   `json:"seq"`
			Data   string   `json:"data"`
			AgeMs  *float64 `json:"ageMs"`
		}
		if err := json.Unmarshal(nextEvent(t, op, EventChunk), &ev); err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(ev.Data)
		if err != nil || ev.ViewID != r.ViewID || ev.Seq != seq {
			t.Fatalf("chunk %d: view %s seq %d err %v", seq, ev.ViewID, ev.Seq, err)
		}
		// The offset takes the node's 5 s lead away: an age, not 5 s.
		if ev.AgeMs == nil || *ev.AgeMs < 0 || *ev.AgeMs > 4000 {
			t.Fatalf("chunk %d: ageMs %v", seq, ev.AgeMs)
		}
		got = append(got, b...)
	}
	if string(got) != string(src) {
		t.Fatal("the viewer's bytes differ from the node's")
	}

	var saved SaveResult
	if err := call(op, MethodSave, map[string]any{"viewId": r.ViewID, "seconds": 5}, &saved); err != nil {
		t.Fatalf("live.save: %v", err)
	}
	if saved.Command != SaveCommand || saved.Device != n.id || saved.MIME != "video/webm" || saved.Size < 1000 || saved.DurationMs < 1000 {
		t.Fatalf("saved %+v", saved.Meta)
	}
	if ff, err := exec.LookPath("ffprobe"); err == nil {
		out, err := exec.Command(ff, "-v", "error", "-show_entries", "stream=codec_name,width", "-of", "csv=p=0", saved.Path).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "vp8,640" {
			t.Fatalf("ffprobe of the saved clip: %v %s", err, out)
		}
	}
	wantCode(t, call(op, MethodSave, map[string]any{"viewId": r.ViewID, "seconds": 61}, nil), gateway.CodeInvalidRequest, "seconds")

	var st map[string]bool
	if err := call(op, MethodStop, map[string]string{"viewId": r.ViewID}, &st); err != nil || !st["stopped"] {
		t.Fatalf("live.stop: %v %v", st, err)
	}
	var ended map[string]string
	_ = json.Unmarshal(nextEvent(t, op, EventEnded), &ended)
	if ended["viewId"] != r.ViewID || ended["reason"] != ReasonStopped || ended["by"] != ByViewer {
		t.Fatalf("live.ended %v", ended)
	}
	if x := conn.sentOf(msgStop); len(x) != 1 || !strings.Contains(string(x[0]), `"by":"viewer"`) {
		t.Fatalf("the node was not told: %q", x)
	}
	select {
	case <-conn.shut:
	case <-time.After(60 * time.Second):
		t.Fatal("the node's connection was not closed")
	}
	if err := call(op, MethodStop, map[string]string{"viewId": r.ViewID}, &st); err != nil || st["stopped"] {
		t.Fatalf("a second live.stop: %v %v", st, err)
	}
	if es := audits(t, f.al, MethodOpen); len(es) != 1 || es[0].Result != audit.Allowed {
		t.Fatalf("live.open audit: %+v", es)
	}
}

func audits(t *testing.T, al *audit.Log, op string) []audit.Entry {
	t.Helper()
	es, err := al.Tail(10000, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	for _, e := range es {
		if e.Operation == op {
			out = append(out, e)
		}
	}
	return out
}

// TestLiveEnds: every way a view ends reaches the viewer as live.ended
// with its reason, and the view is gone.
func TestLiveEnds(t *testing.T) {
	src := chromiumWebM(t)
	cases := []struct {
		name, reason, by string
		o                Options
		do               func(f *fixture, op *gateway.Client, c *fakeConn)
	}{
		{"node stops", ReasonStopped, ByNode, Options{}, func(f *fixture, op *gateway.Client, c *fakeConn) {
			c.hooks.Message(jsonMsg(msgStop, stopMsg{Reason: "stopped"}))
		}},
		{"node channel closes", ReasonNodeGone, ByNode, Options{}, func(f *fixture, op *gateway.Client, c *fakeConn) { c.Close() }},
		{"not webm", ReasonBadStream, ByGateway, Options{}, func(f *fixture, op *gateway.Client, c *fakeConn) {
			c.hooks.Message(chunkMsg(0, 1, []byte("this is not a WebM stream at all")))
		}},
		{"oversized chunk", ReasonBadStream, ByGateway, Options{MaxChunkBytes: 1000}, func(f *fixture, op *gateway.Client, c *fakeConn) {
			c.hooks.Message(chunkMsg(0, 1, src[:1001]))
		}},
		{"unknown message", ReasonBadStream, ByGateway, Options{}, func(f *fixture, op *gateway.Client, c *fakeConn) {
			c.hooks.Message([]byte("Zzz"))
		}},
		{"silent node", ReasonNodeSilent, ByGateway, Options{IdleTimeout: 100 * time.Millisecond, PingInterval: 20 * time.Millisecond}, func(*fixture, *gateway.Client, *fakeConn) {}},
		{"max duration", ReasonMaxDuration, ByGateway, Options{MaxDuration: 50 * time.Millisecond}, func(*fixture, *gateway.Client, *fakeConn) {}},
		{"slow viewer", ReasonViewerSlow, ByGateway, Options{}, func(f *fixture, op *gateway.Client, c *fakeConn) {
			f.live.queued = func(string) (int64, bool) { return DefaultViewerBacklog + 1, true }
			c.hooks.Message(chunkMsg(0, 1, src[:5000]))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.o)
			op := f.operator()
			n := f.node("phone", "v=0 offer")
			r, c := f.open(op, n.id)
			tc.do(f, op, c)
			var ended map[string]string
			_ = json.Unmarshal(nextEvent(t, op, EventEnded), &ended)
			if ended["viewId"] != r.ViewID || ended["reason"] != tc.reason || ended["by"] != tc.by {
				t.Fatalf("live.ended %v, want %s by %s", ended, tc.reason, tc.by)
			}
			if f.live.Views() != 0 {
				t.Fatal("the view is still there")
			}
			stops := c.sentOf(msgStop)
			if tc.by == ByNode && len(stops) != 0 || tc.by != ByNode && len(stops) != 1 {
				t.Fatalf("the node was told %q", stops)
			}
			select {
			case <-c.shut:
			case <-time.After(60 * time.Second):
				t.Fatal("the node's connection was not closed")
			}
		})
	}
}

// TestLiveViewerGone: the viewer's connection closing ends its views.
func TestLiveViewerGone(t *testing.T) {
	f := newFixture(t, Options{})
	op := f.operator()
	n := f.node("phone", "v=0 offer")
	_, c := f.open(op, n.id)
	op.Close()
	select {
	case <-c.shut:
	case <-time.After(60 * time.Second):
		t.Fatal("the node's connection was not closed")
	}
	if x := c.sentOf(msgStop); len(x) != 1 || !strings.Contains(string(x[0]), ReasonViewerGone) {
		t.Fatalf("the node was told %q", x)
	}
}

// TestLiveRefusals: bounds, bad params, a node that cannot start, offers
// nobody asked for, and the principals that may not call the methods.
func TestLiveRefusals(t *testing.T) {
	f := newFixture(t, Options{MaxViews: 2})
	op := f.operator()
	n := f.node("phone", "v=0 offer")
	r, _ := f.open(op, n.id)

	// One view per node; the total bound.
	wantCode(t, call(op, MethodOpen, map[string]any{"nodeId": n.id, "source": "camera"}, nil), gateway.CodeUnavailable, "already streaming")
	n2 := f.node("laptop", "v=0 offer")
	f.open(op, n2.id)
	n3 := f.node("tablet", "v=0 offer")
	wantCode(t, call(op, MethodOpen, map[string]any{"nodeId": n3.id, "source": "camera"}, nil), gateway.CodeUnavailable, "2 live views are open")

	for _, p := range []map[string]any{
		{"nodeId": n3.id, "source": "microphone"},
		{"source": "camera"},
		{"nodeId": n3.id, "source": "camera", "fps": 60},
		{"nodeId": n3.id, "source": "camera", "maxWidth": 4000},
		{"nodeId": n3.id, "source": "camera", "facing": "up"},
		{"nodeId": n3.id, "source": "screen", "facing": "front"},
	} {
		wantCode(t, call(op, MethodOpen, p, nil), gateway.CodeInvalidRequest, "live.open")
	}

	// Offers: unknown view, another node's view, a second offer.
	wantCode(t, call(n3.c, MethodOffer, map[string]string{"viewId": "0123456789abcdef0123456789abcdef", "sdp": "v=0"}, nil), gateway.CodeForbidden, "no live view")
	wantCode(t, call(n3.c, MethodOffer, map[string]string{"viewId": r.ViewID, "sdp": "v=0"}, nil), gateway.CodeForbidden, "another node")
	wantCode(t, call(n.c, MethodOffer, map[string]string{"viewId": r.ViewID, "sdp": "v=0"}, nil), gateway.CodeForbidden, "already")
	wantCode(t, call(n.c, MethodOffer, map[string]string{"viewId": r.ViewID, "sdp": strings.Repeat("a", MaxOfferSDP+1)}, nil), gateway.CodeInvalidRequest, "sdp")
	if es := audits(t, f.al, MethodOffer); len(es) != 3 {
		t.Fatalf("%d node.live.offer refusals audited, want 3", len(es))
	}

	// Nodes may not open, stop or save; an operator may not offer.
	for _, m := range []string{MethodOpen, MethodStop, MethodSave} {
		wantCode(t, call(n3.c, m, map[string]any{"nodeId": n.id, "source": "camera", "viewId": r.ViewID, "seconds": 5}, nil), gateway.CodeForbidden, "")
	}
	wantCode(t, call(op, MethodOffer, map[string]string{"viewId": r.ViewID, "sdp": "v=0"}, nil), gateway.CodeForbidden, "")

	// A node that cannot start answers why.
	g := newFixture(t, Options{})
	gop := g.operator()
	bg := g.node("phone", "")
	wantCode(t, call(gop, MethodOpen, map[string]any{"nodeId": bg.id, "source": "camera"}, nil), gateway.CodeUnavailable, "NODE_BACKGROUND_UNAVAILABLE")
	if g.live.Views() != 0 {
		t.Fatal("a view the node refused is still there")
	}
	// A malformed offer is INVALID_REQUEST for the node, and the open fails.
	bad := g.node("laptop", "not an sdp")
	wantCode(t, call(gop, MethodOpen, map[string]any{"nodeId": bad.id, "source": "camera"}, nil), gateway.CodeUnavailable, "INVALID_REQUEST")
	// Nothing to save before a keyframe.
	ok := g.node("tablet", "v=0 offer")
	r3, _ := g.open(gop, ok.id)
	wantCode(t, call(gop, MethodSave, map[string]any{"viewId": r3.ViewID, "seconds": 5}, nil), gateway.CodeUnavailable, "no keyframe")
	// Another operator's connection neither stops nor saves someone's view
	// unless it is the person (admin): a local operator is admin.
	wantCode(t, call(gop, MethodSave, map[string]any{"viewId": "nope", "seconds": 5}, nil), gateway.CodeNotFound, "no live view")
}
