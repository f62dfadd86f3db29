package rtc

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/pion/webrtc/v4"
)

// StreamLabel is the label of a live view's data channel (package live
// defines what travels on it; docs/PROTOCOL.md "Live view"). A Talk's
// channel is "atrium-talk" (package talk). AcceptStream and DialStream
// take the label: one ordered, reliable channel of that label per
// connection.
const StreamLabel = "atrium-live"

// StreamHooks receive what a Stream's channel delivers. Both are called on
// pion's goroutines, one message at a time, in order; Message must not
// block for long (a slow hook holds the channel's reads, which is SCTP
// flow control back to the node).
type StreamHooks struct {
	// Message gets each binary message (at most Config.MaxMessageSize
	// bytes); a text message is delivered as one zero byte, an invalid
	// type for the caller to refuse.
	Message func(b []byte)
	// Closed is called once when the stream ends: the channel closed, the
	// connection failed, the channel did not open within
	// Config.ConnectTimeout, or Close was called.
	Closed func()
}

// Stream is one side of a stream connection (a live view's, a talk's):
// one ordered, reliable data channel of the label it was made with, opened
// by the offerer (the node, the page).
type Stream struct {
	pc    *webrtc.PeerConnection
	hooks StreamHooks
	label string

	mu     sync.Mutex
	dc     *webrtc.DataChannel
	closed bool
	// low is signalled when the channel's queue falls to StreamLowWater;
	// done is closed with the stream (WaitBuffered).
	low  chan struct{}
	done chan struct{}
	// connect closes a stream whose channel did not open in time;
	// stopped by Close, so that a closed stream is not held until then.
	connect *time.Timer
}

// StreamLowWater is the queued bytes at which a Stream's WaitBuffered
// looks again (the data channel's bufferedAmountLowThreshold).
const StreamLowWater = 256 << 10

// AcceptStream answers an offerer's SDP offer for a stream (a node's live
// view with StreamLabel, a page's talk with "atrium-talk"; non-trickle:
// the answer holds every candidate) with the same ICE rules as media
// transfers: host candidates on cfg.BindIPs only, the offerer's candidates
// from peer only (nil: any unicast address), no STUN/TURN/mDNS. The
// stream's first data channel labelled label is taken, any other closed. Errors: ErrOffer (no single SHA-256 fingerprint, or an SDP pion
// refuses), ctx's, pion's; on an error nothing is left open.
func AcceptStream(ctx context.Context, cfg Config, label string, peer net.IP, offerSDP string, hooks StreamHooks) (*Stream, string, error) {
	cfg = cfg.withDefaults()
	if _, err := fingerprint(offerSDP); err != nil {
		return nil, "", err
	}
	pc, err := cfg.newPC(peer)
	if err != nil {
		return nil, "", err
	}
	s := &Stream{pc: pc, hooks: hooks, label: label, low: make(chan struct{}, 1), done: make(chan struct{})}
	pc.OnDataChannel(s.take)
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		if st == webrtc.PeerConnectionStateFailed || st == webrtc.PeerConnectionStateClosed {
			s.Close()
		}
	})
	// A stream whose channel does not open in time is closed.
	s.mu.Lock()
	s.connect = time.AfterFunc(cfg.ConnectTimeout, func() {
		s.mu.Lock()
		open := s.dc != nil
		s.mu.Unlock()
		if !open {
			s.Close()
		}
	})
	s.mu.Unlock()
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offerSDP}); err != nil {
		s.Close()
		return nil, "", fmt.Errorf("rtc: set stream offer: %w: %w", ErrOffer, err)
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		s.Close()
		return nil, "", fmt.Errorf("rtc: stream answer: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	sdp, err := gather(cctx, pc, answer)
	if err != nil {
		s.Close()
		return nil, "", err
	}
	return s, sdp, nil
}

func (s *Stream) take(dc *webrtc.DataChannel) {
	s.mu.Lock()
	if dc.Label() != s.label || s.dc != nil || s.closed {
		s.mu.Unlock()
		_ = dc.Close()
		return
	}
	s.dc = dc
	s.mu.Unlock()
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		b := m.Data
		if m.IsString || len(b) == 0 {
			b = []byte{0}
		}
		if s.hooks.Message != nil {
			s.hooks.Message(b)
		}
	})
	dc.SetBufferedAmountLowThreshold(StreamLowWater)
	dc.OnBufferedAmountLow(func() {
		select {
		case s.low <- struct{}{}:
		default:
		}
	})
	dc.OnClose(s.Close)
}

// WaitBuffered blocks until at most max bytes (max ≥ StreamLowWater) are
// queued on the channel: the sender's backpressure, so that a peer that
// reads slowly holds the sender back instead of the queue growing without
// bound. Errors: the stream is closed or not open, ctx's.
func (s *Stream) WaitBuffered(ctx context.Context, max int) error {
	for {
		s.mu.Lock()
		dc, closed := s.dc, s.closed
		s.mu.Unlock()
		if dc == nil || closed {
			return fmt.Errorf("rtc: %s stream not open", s.label)
		}
		if int(dc.BufferedAmount()) <= max {
			return nil
		}
		select {
		case <-s.low:
		case <-s.done:
		case <-ctx.Done():
			return fmt.Errorf("rtc: %s stream backlog: %w", s.label, ctx.Err())
		}
	}
}

// Send queues b on the channel. Errors: the channel is not open (yet, or
// any more), pion's.
func (s *Stream) Send(b []byte) error {
	s.mu.Lock()
	dc, closed := s.dc, s.closed
	s.mu.Unlock()
	if dc == nil || closed {
		return fmt.Errorf("rtc: %s stream not open", s.label)
	}
	if err := dc.Send(b); err != nil {
		return fmt.Errorf("rtc: %s stream send: %w", s.label, err)
	}
	return nil
}

// Buffered is the bytes queued on the channel and not yet sent.
func (s *Stream) Buffered() int {
	s.mu.Lock()
	dc := s.dc
	s.mu.Unlock()
	if dc == nil {
		return 0
	}
	return int(dc.BufferedAmount())
}

// Close ends the stream (its connection closed); Closed is called once.
// Safe to call more than once and from the hooks.
func (s *Stream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.connect != nil {
		s.connect.Stop()
	}
	s.mu.Unlock()
	close(s.done)
	go func() { _ = s.pc.Close() }() // not on pion's own callback goroutine
	if s.hooks.Closed != nil {
		s.hooks.Closed()
	}
}

// DialStream is the offerer's side of a stream (a node's live view with
// StreamLabel; a Go peer of a talk with "atrium-talk"): it offers one
// ordered, reliable data channel labelled label (non-trickle: host
// candidates on cfg.BindIPs, no STUN/TURN/mDNS), has signal carry the
// offer to the gateway (node.live.offer) and returns once the channel is
// open, within cfg.ConnectTimeout. The hooks get the gateway's messages
// and the end. Errors: signal's, ctx's, the channel not opening in time,
// pion's; on an error nothing is left open.
func DialStream(ctx context.Context, cfg Config, label string, signal Signal, hooks StreamHooks) (*Stream, error) {
	cfg = cfg.withDefaults()
	pc, err := cfg.newPC(nil)
	if err != nil {
		return nil, err
	}
	s := &Stream{pc: pc, hooks: hooks, label: label, low: make(chan struct{}, 1), done: make(chan struct{})}
	ordered := true
	dc, err := pc.CreateDataChannel(label, &webrtc.DataChannelInit{Ordered: &ordered})
	if err != nil {
		_ = pc.Close()
		return nil, fmt.Errorf("rtc: %s channel: %w", label, err)
	}
	open := make(chan struct{})
	dc.OnOpen(func() { close(open) })
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		if st == webrtc.PeerConnectionStateFailed || st == webrtc.PeerConnectionStateClosed {
			s.Close()
		}
	})
	fail := func(err error) (*Stream, error) {
		s.Close()
		return nil, err
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return fail(fmt.Errorf("rtc: %s offer: %w", label, err))
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	sdp, err := gather(cctx, pc, offer)
	if err != nil {
		return fail(err)
	}
	answer, err := signal(cctx, sdp)
	if err != nil {
		return fail(fmt.Errorf("rtc: %s offer refused: %w", label, err))
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer}); err != nil {
		return fail(fmt.Errorf("rtc: %s answer: %w", label, err))
	}
	select {
	case <-open:
	case <-cctx.Done():
		return fail(fmt.Errorf("rtc: the %s channel did not open: %w", label, cctx.Err()))
	}
	s.take(dc)
	return s, nil
}
