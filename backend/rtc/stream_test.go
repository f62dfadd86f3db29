package rtc

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"
)

// liveNode is a pion peer playing the node of a live view: it offers one
// data channel labelled label.
func liveNode(t *testing.T, label string) (*webrtc.PeerConnection, *webrtc.DataChannel, string) {
	t.Helper()
	pc, err := Config{}.withDefaults().newPC(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	dc, err := pc.CreateDataChannel(label, nil)
	if err != nil {
		t.Fatal(err)
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sdp, err := gather(ctx, pc, offer)
	if err != nil {
		t.Fatal(err)
	}
	return pc, dc, sdp
}

func within(t *testing.T, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestAcceptStream: the node's messages reach the hook in order, the
// gateway's reach the node, and the node closing its channel ends the
// stream once.
func TestAcceptStream(t *testing.T) {
	pc, dc, offer := liveNode(t, StreamLabel)
	got := make(chan []byte, 16)
	closed := make(chan struct{})
	calls := 0
	s, answer, err := AcceptStream(context.Background(), Config{}, StreamLabel, net.IPv4(127, 0, 0, 1), offer, StreamHooks{
		Message: func(b []byte) { got <- append([]byte(nil), b...) },
		Closed:  func() { calls++; close(closed) },
	})
	if err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	back := make(chan string, 1)
	dc.OnOpen(func() { close(open) })
	dc.OnMessage(func(m webrtc.DataChannelMessage) { back <- string(m.Data) })
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer}); err != nil {
		t.Fatal(err)
	}
	within(t, "the channel to open", open)
	for _, m := range []string{"C1", "C2", "Q3"} {
		if err := dc.Send([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"C1", "C2", "Q3"} {
		select {
		case b := <-got:
			if string(b) != want {
				t.Fatalf("got %q, want %q", b, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no %q", want)
		}
	}
	if err := dc.SendText("text"); err != nil {
		t.Fatal(err)
	}
	if b := <-got; len(b) != 1 || b[0] != 0 {
		t.Fatalf("a text message arrived as %q, want one zero byte", b)
	}
	// The gateway's side sends once the channel is open.
	deadline := time.Now().Add(60 * time.Second)
	for s.Send([]byte("P")) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the stream never opened on the gateway's side")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := <-back; m != "P" {
		t.Fatalf("the node got %q", m)
	}
	_ = dc.Close()
	within(t, "the stream to end", closed)
	s.Close()
	if calls != 1 {
		t.Fatalf("Closed called %d times", calls)
	}
	if s.Send([]byte("P")) == nil {
		t.Fatal("a closed stream sends")
	}
}

// TestAcceptStreamRefuses: a malformed offer, a channel of another label
// (closed; the stream ends when none opens in time).
func TestAcceptStreamRefuses(t *testing.T) {
	if _, _, err := AcceptStream(context.Background(), Config{}, StreamLabel, nil, "v=0\r\n", StreamHooks{}); !errors.Is(err, ErrOffer) {
		t.Fatalf("an offer without a fingerprint: %v", err)
	}
	refusesLabel(t, StreamLabel, "something-else")
}

// refusesLabel: a stream accepted for label closes a channel offered
// with another label (nothing of it delivered) and ends when none of its
// own opens in time.
func refusesLabel(t *testing.T, label, offered string) {
	t.Helper()
	pc, dc, offer := liveNode(t, offered)
	closed := make(chan struct{})
	_, answer, err := AcceptStream(context.Background(), Config{ConnectTimeout: 3 * time.Second}, label, nil, offer, StreamHooks{
		Message: func([]byte) { t.Errorf("a message of a %s channel reached a %s stream", offered, label) },
		Closed:  func() { close(closed) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer}); err != nil {
		t.Fatal(err)
	}
	dc.OnOpen(func() { _ = dc.Send([]byte("C")) })
	within(t, "the "+label+" stream without its channel to end", closed)
}

// TestDialStream: a node's DialStream reaches a gateway's AcceptStream:
// messages go both ways, the node's Close ends the gateway's side.
func TestDialStream(t *testing.T) {
	atGateway := make(chan []byte, 4)
	gwClosed := make(chan struct{})
	var gw *Stream
	signal := func(ctx context.Context, offer string) (string, error) {
		s, answer, err := AcceptStream(ctx, Config{}, StreamLabel, net.IPv4(127, 0, 0, 1), offer, StreamHooks{
			Message: func(b []byte) { atGateway <- append([]byte(nil), b...) },
			Closed:  func() { close(gwClosed) },
		})
		gw = s
		return answer, err
	}
	atNode := make(chan []byte, 4)
	node, err := DialStream(context.Background(), Config{}, StreamLabel, signal, StreamHooks{Message: func(b []byte) { atNode <- append([]byte(nil), b...) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Send([]byte("C1")); err != nil {
		t.Fatal(err)
	}
	if b := <-atGateway; string(b) != "C1" {
		t.Fatalf("the gateway got %q", b)
	}
	deadline := time.Now().Add(60 * time.Second)
	for gw.Send([]byte("P")) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the gateway's side never opened")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if b := <-atNode; string(b) != "P" {
		t.Fatalf("the node got %q", b)
	}
	node.Close()
	within(t, "the gateway's side to end", gwClosed)

	refused := func(context.Context, string) (string, error) { return "", ErrUnrequested }
	if _, err := DialStream(context.Background(), Config{}, StreamLabel, refused, StreamHooks{}); !errors.Is(err, ErrUnrequested) {
		t.Fatalf("a refused offer: %v", err)
	}
}

// TestStreamLabel: the label is the caller's (a talk's "atrium-talk"): a
// Go offerer dialling that label reaches a gateway accepting it, and the
// same gateway refuses a live view's channel (the stream ends when none
// of its own label opens).
func TestStreamLabel(t *testing.T) {
	const talkLabel = "atrium-talk"
	got := make(chan []byte, 1)
	signal := func(ctx context.Context, offer string) (string, error) {
		_, answer, err := AcceptStream(ctx, Config{}, talkLabel, net.IPv4(127, 0, 0, 1), offer, StreamHooks{
			Message: func(b []byte) { got <- append([]byte(nil), b...) },
		})
		return answer, err
	}
	peer, err := DialStream(context.Background(), Config{}, talkLabel, signal, StreamHooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := peer.Send([]byte("U{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if string(b) != "U{}" {
			t.Fatalf("the gateway got %q", b)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the talk channel's message never arrived")
	}

	refusesLabel(t, talkLabel, StreamLabel)
}

// TestStreamBackpressure: a peer that stops reading (its Message hook
// holds the channel's reads, so SCTP's window closes) holds the sender
// back: WaitBuffered stops returning once more than max bytes are queued,
// the queue never grows past max and one message, and everything sent
// arrives, in order, once the peer reads again.
func TestStreamBackpressure(t *testing.T) {
	const msg, max = 64 << 10, 1 << 20
	release := make(chan struct{})
	got := make(chan int, 256)
	signal := func(ctx context.Context, offer string) (string, error) {
		_, answer, err := AcceptStream(ctx, Config{}, StreamLabel, net.IPv4(127, 0, 0, 1), offer, StreamHooks{
			Message: func(b []byte) {
				<-release
				got <- int(b[0])
			},
		})
		return answer, err
	}
	node, err := DialStream(context.Background(), Config{}, StreamLabel, signal, StreamHooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	sent, held := 0, false
	for sent < 128 && !held { // 8 MiB: far more than SCTP's window and max
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := node.WaitBuffered(ctx, max)
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("WaitBuffered: %v", err)
			}
			held = true
			break
		}
		b := make([]byte, msg)
		b[0] = byte(sent)
		if err := node.Send(b); err != nil {
			t.Fatal(err)
		}
		sent++
		if q := node.Buffered(); q > max+msg {
			t.Fatalf("%d bytes queued after a wait for at most %d", q, max)
		}
	}
	if !held {
		t.Fatalf("%d messages of %d bytes went out to a peer that reads nothing, never held back", sent, msg)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := node.WaitBuffered(ctx, StreamLowWater); err != nil {
		t.Fatalf("the queue did not drain once the peer read again: %v", err)
	}
	for i := range sent {
		select {
		case n := <-got:
			if n != i%256 {
				t.Fatalf("message %d arrived as %d", i, n)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d messages arrived", i, sent)
		}
	}
}
