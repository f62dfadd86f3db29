package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
)

// fakeMedia is a MediaReceiver whose transfers end as the test says
// (the real one, over rtc, is tested in backend/atrium and backend/e2e).
type fakeMedia struct {
	mu      sync.Mutex
	busy    bool
	tickets []MediaTicket
	trs     map[string]*fakeTransfer
	answer  error
}

type fakeTransfer struct {
	end     chan error // the outcome Wait returns
	aborted chan struct{}
	once    sync.Once
}

func (m *fakeMedia) Expect(t MediaTicket) (MediaTransfer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.busy {
		return nil, fmt.Errorf("fake: %w", media.ErrBusy)
	}
	m.tickets = append(m.tickets, t)
	tr := &fakeTransfer{end: make(chan error, 1), aborted: make(chan struct{})}
	if m.trs == nil {
		m.trs = map[string]*fakeTransfer{}
	}
	m.trs[t.ID] = tr
	return tr, nil
}

func (m *fakeMedia) Answer(ctx context.Context, device, id, sdp string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.answer != nil {
		return "", m.answer
	}
	return "answer for " + device + " " + id, nil
}

func (m *fakeMedia) transfer(id string) *fakeTransfer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.trs[id]
}

func (t *fakeTransfer) Wait(ctx context.Context) (Media, error) {
	select {
	case err := <-t.end:
		if err != nil {
			return Media{}, err
		}
		return Media{Meta: media.Meta{ID: "stored", Size: 3, Transport: media.TransportWebRTC}, Path: "/media/stored.jpg"}, nil
	case <-ctx.Done():
		return Media{}, ctx.Err()
	}
}

func (t *fakeTransfer) Abort() { t.once.Do(func() { close(t.aborted) }) }

// transferOf reads the transfer a media command's request carries.
func transferOf(t *testing.T, r InvokeRequestEvent) transferParams {
	t.Helper()
	var p struct{ Transfer transferParams }
	if err := json.Unmarshal(r.Params, &p); err != nil || !media.ValidID(p.Transfer.ID) {
		t.Fatalf("request params %s: no transfer (%v)", r.Params, err)
	}
	return p.Transfer
}

// TestMediaCommandWithoutReceiver: a bare service (no Media) expects no
// transfer and passes the node's result through; an offer is FORBIDDEN
// (nothing was asked for). With a receiver that expects too many, UNAVAILABLE before
// anything is sent.
func TestMediaCommandWithoutReceiver(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("phone", []string{"camera"}, []string{"camera.snap"})
	n.serve(func(r InvokeRequestEvent) any { return map[string]string{"params": string(r.Params)} })
	r, err := invoke(f.operator("ui"), map[string]any{"nodeId": n.id, "command": "camera.snap"})
	if err != nil || !r.OK || string(r.Payload) != `{"params":"{}"}` {
		t.Fatalf("camera.snap without a receiver: %+v %v", r, err)
	}
	err = n.c.Call(context.Background(), MethodMediaOffer, map[string]string{"transferId": media.NewID(), "sdp": "v=0"}, nil)
	wantCode(t, err, gateway.CodeForbidden, "was asked for")

	fm := &fakeMedia{busy: true}
	f = newFixture(t, Options{Media: fm})
	n = f.node("phone", []string{"camera"}, []string{"camera.snap"})
	_, err = invoke(f.operator("ui"), map[string]any{"nodeId": n.id, "command": "camera.snap"})
	wantCode(t, err, gateway.CodeUnavailable, "too many media transfers")
}

// TestMediaTransferFailsAndOffers: the ticket names the node, its address
// and the command; a failed transfer is a failed result with the
// transport's code and the node gets node.media.cancel; offers: only the
// invoked connection, only for its transfer, a malformed one INVALID_REQUEST.
func TestMediaTransferFailsAndOffers(t *testing.T) {
	fm := &fakeMedia{}
	f := newFixture(t, Options{Media: fm, MaxMediaBytes: 1 << 20})
	n := f.node("phone", []string{"camera"}, []string{"camera.snap"})
	other := f.node("other", []string{"camera"}, []string{"camera.snap"})
	op := f.operator("ui")
	type res struct {
		r   InvokeResult
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := invoke(op, map[string]any{"nodeId": n.id, "command": "camera.snap", "params": map[string]any{"maxWidth": 320}, "timeoutMs": 60000})
		done <- res{r, err}
	}()
	req := n.request()
	tp := transferOf(t, req)
	if tp.MaxSize != 1<<20 || !strings.Contains(string(req.Params), `"maxWidth":320`) {
		t.Fatalf("request params %s", req.Params)
	}
	fm.mu.Lock()
	tk := fm.tickets[0]
	fm.mu.Unlock()
	if tk.ID != tp.ID || tk.Device != n.id || tk.Command != "camera.snap" || tk.PeerIP.String() != "127.0.0.1" || tk.MaxSize != 1<<20 || tk.Deadline.IsZero() {
		t.Fatalf("ticket %+v", tk)
	}

	offer := func(c *gateway.Client, id, sdp string) (string, error) {
		var r struct{ SDP string }
		err := c.Call(context.Background(), MethodMediaOffer, map[string]string{"transferId": id, "sdp": sdp}, &r)
		return r.SDP, err
	}
	if sdp, err := offer(n.c, tp.ID, "v=0"); err != nil || sdp != "answer for "+n.id+" "+tp.ID {
		t.Fatalf("the node's offer: %q %v", sdp, err)
	}
	_, err := offer(other.c, tp.ID, "v=0")
	wantCode(t, err, gateway.CodeForbidden, "another node connection")
	_, err = offer(n.c, media.NewID(), "v=0")
	wantCode(t, err, gateway.CodeForbidden, "was asked for")
	_, err = offer(n.c, tp.ID, strings.Repeat("a", MaxOfferSDP+1))
	wantCode(t, err, gateway.CodeInvalidRequest, "at most")
	fm.mu.Lock()
	fm.answer = fmt.Errorf("fake: %w", ErrMediaOffer)
	fm.mu.Unlock()
	_, err = offer(n.c, tp.ID, "v=0")
	wantCode(t, err, gateway.CodeInvalidRequest, "invalid media SDP offer")
	if es := f.audits(MethodMediaOffer); len(es) != 2 || es[0].Result != audit.Denied || es[1].Result != audit.Denied ||
		es[0].Target != other.id+" "+tp.ID && es[1].Target != other.id+" "+tp.ID {
		t.Fatalf("offer audits %+v", es)
	}

	// The node says it sent the file, the transport says it was too large.
	fm.transfer(tp.ID).end <- &MediaError{Code: "TOO_LARGE", Message: "2000000 bytes, the limit is 1048576"}
	m, _ := json.Marshal(map[string]string{"id": tp.ID, "transport": "webrtc"})
	if err := n.c.Call(context.Background(), MethodInvokeResult, ResultParams{ID: req.ID, OK: true, Payload: json.RawMessage(`{}`), Media: m}, nil); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.r.OK || got.r.Error == nil || got.r.Error.Code != "TOO_LARGE" || got.r.Media != nil {
		t.Fatalf("a failed transfer: %+v %v", got.r, got.err)
	}
	var c struct{ TransferID, Code string }
	if err := json.Unmarshal(nextEvent(t, n.c, EventMediaCancel).Payload, &c); err != nil || c.TransferID != tp.ID || c.Code != "TOO_LARGE" {
		t.Fatalf("node.media.cancel %+v %v", c, err)
	}
	select {
	case <-fm.transfer(tp.ID).aborted:
	default:
		t.Fatal("the failed transfer was not aborted")
	}
	// Its id is refused from now on.
	_, err = offer(n.c, tp.ID, "v=0")
	wantCode(t, err, gateway.CodeForbidden, "was asked for")

	// A stored file: node.invoke's media is the receiver's sidecar and path.
	go func() {
		r, err := invoke(op, map[string]any{"nodeId": n.id, "command": "camera.snap", "timeoutMs": 60000})
		done <- res{r, err}
	}()
	req = n.request()
	tp = transferOf(t, req)
	fm.transfer(tp.ID).end <- nil
	m, _ = json.Marshal(map[string]string{"id": tp.ID, "transport": "webrtc"})
	if err := n.c.Call(context.Background(), MethodInvokeResult, ResultParams{ID: req.ID, OK: true, Media: m}, nil); err != nil {
		t.Fatal(err)
	}
	got = <-done
	if got.err != nil || !got.r.OK || !strings.Contains(string(got.r.Media), `"path":"/media/stored.jpg"`) || !strings.Contains(string(got.r.Media), `"id":"stored"`) {
		t.Fatalf("a stored file: %+v (media %s) %v", got.r, got.r.Media, got.err)
	}

	// The node goes mid-invoke: the transfer is aborted.
	go func() {
		r, err := invoke(op, map[string]any{"nodeId": n.id, "command": "camera.snap", "timeoutMs": 60000})
		done <- res{r, err}
	}()
	tp = transferOf(t, n.request())
	if err := n.c.Close(); err != nil {
		t.Fatal(err)
	}
	got = <-done
	wantCode(t, got.err, gateway.CodeUnavailable, "disconnected")
	<-fm.transfer(tp.ID).aborted
}

// TestLocalNodeCutMidTransferFails: a local node's id names its
// connection, so its transfer cannot be resumed from another one: when
// its connection ends after its offer was answered, node.invoke fails
// UNAVAILABLE (not a wait until its 60 s deadline, which would end
// TIMEOUT) and the transfer is aborted. Before the offer, the same.
func TestLocalNodeCutMidTransferFails(t *testing.T) {
	for _, offered := range []bool{true, false} {
		fm := &fakeMedia{}
		f := newFixture(t, Options{Media: fm})
		n := f.node("desk", []string{"camera"}, []string{"camera.clip"})
		done := make(chan error, 1)
		go func() {
			_, err := invoke(f.operator("ui"), map[string]any{"nodeId": n.id, "command": "camera.clip", "timeoutMs": 60000})
			done <- err
		}()
		tr := transferOf(t, n.request())
		if offered {
			var a struct{ SDP string }
			if err := n.c.Call(context.Background(), MethodMediaOffer, map[string]string{"transferId": tr.ID, "sdp": "v=0"}, &a); err != nil || a.SDP == "" {
				t.Fatalf("the offer: %+v %v", a, err)
			}
		}
		n.c.Close()
		wantCode(t, <-done, gateway.CodeUnavailable, "disconnected")
		<-fm.transfer(tr.ID).aborted
	}
}
