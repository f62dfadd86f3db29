package rtc

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/atrium-dev/atrium/backend/media"
)

// Signal carries the sender's SDP offer to the receiver over the gateway
// WebSocket (node.media.offer) and returns its SDP answer.
type Signal func(ctx context.Context, offerSDP string) (answerSDP string, err error)

// File is what a sender sends: its bytes through ReaderAt (read twice:
// once to hash, once to send), its Size, and what the sidecar says of it.
type File struct {
	ID         string // the transfer id the gateway gave (node.invoke params)
	Name       string
	Data       io.ReaderAt
	Size       int64
	MIME       string
	Width      int
	Height     int
	DurationMs int64
}

// Sent is what one Send did.
type Sent struct {
	SHA256     string // hex, as the receiver confirmed it
	BlockSize  int
	Blocks     int // blocks in the file
	BlocksSent int // blocks sent on this connection (resends included)
	Rounds     int // need/end rounds on this connection
}

// Sender sends files. The zero value uses the Config defaults.
type Sender struct {
	Config Config

	// testAfterBlock, when set by a test, is called after block i was
	// queued; returning true cuts the connection there.
	testAfterBlock func(i int) bool
	// testCorrupt, when set by a test, may change a block before it is sent.
	testCorrupt func(i int, b []byte)
	// testBlockMsgs, when set by a test, replaces block i's message by
	// the messages it returns (a misbehaving sender).
	testBlockMsgs func(i int, m []byte) [][]byte
}

// Send offers f over a new peer connection, signalled through signal, and
// sends what the receiver asks for until it confirms the file. Calling it
// again with the same f.ID after a cut resumes: only missing blocks go.
// Errors: *CancelError (the receiver refused or gave up: a Code says why),
// a deadline (Config.ConnectTimeout, IdleTimeout, ctx), a closed channel.
func (s *Sender) Send(ctx context.Context, f File, signal Signal) (Sent, error) {
	c := s.Config.withDefaults()
	pc, err := c.newPC(nil)
	if err != nil {
		return Sent{}, err
	}
	defer pc.Close()
	ordered := true
	dc, err := pc.CreateDataChannel(ChannelLabel, &webrtc.DataChannelInit{Ordered: &ordered})
	if err != nil {
		return Sent{}, fmt.Errorf("rtc: data channel: %w", err)
	}
	in := newInbox(dc, c.LowWater)
	defer in.stop()
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return Sent{}, fmt.Errorf("rtc: offer: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.ConnectTimeout)
	defer cancel()
	sdp, err := gather(cctx, pc, offer)
	if err != nil {
		return Sent{}, err
	}
	answer, err := signal(cctx, sdp)
	if err != nil {
		return Sent{}, fmt.Errorf("rtc: signal: %w", err)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer}); err != nil {
		return Sent{}, fmt.Errorf("rtc: set answer: %w", err)
	}
	select {
	case <-in.open:
	case <-in.closed:
		return Sent{}, fmt.Errorf("rtc: data channel closed before it opened: %w", io.ErrUnexpectedEOF)
	case <-cctx.Done():
		return Sent{}, fmt.Errorf("rtc: connecting: %w", cctx.Err())
	}
	peerMax := int(pc.SCTP().GetCapabilities().MaxMessageSize)
	bs := min(c.BlockSize, media.MaxBlockSize)
	if peerMax > 0 {
		bs = min(bs, peerMax-headerLen)
	}
	if bs < media.MinBlockSize {
		return Sent{}, fmt.Errorf("rtc: the peer's maxMessageSize %d is below a block of %d bytes", peerMax, media.MinBlockSize)
	}
	st := &sendState{s: s, c: c, dc: dc, in: in, f: f, bs: bs}
	return st.run(ctx, peerMax)
}

type sendState struct {
	s      *Sender
	c      Config
	dc     *webrtc.DataChannel
	in     *inbox
	f      File
	bs     int
	hashes [][32]byte
	sent   Sent
}

func (st *sendState) run(ctx context.Context, peerMax int) (Sent, error) {
	f := st.f
	n := media.NumBlocks(f.Size, st.bs)
	if n == 0 {
		return Sent{}, fmt.Errorf("rtc: empty file %q", f.Name)
	}
	whole := sha256.New()
	buf := make([]byte, st.bs)
	st.hashes = make([][32]byte, n)
	for i := range n {
		b, err := st.block(i, buf)
		if err != nil {
			return Sent{}, err
		}
		st.hashes[i] = sha256.Sum256(b)
		whole.Write(b)
	}
	sum := hex.EncodeToString(whole.Sum(nil))
	st.sent = Sent{SHA256: sum, BlockSize: st.bs, Blocks: n}
	offer := Offer{V: Version, ID: f.ID, Name: f.Name, Size: f.Size, SHA256: sum, BlockSize: st.bs, Blocks: n,
		MIME: f.MIME, Width: f.Width, Height: f.Height, DurationMs: f.DurationMs}
	if err := st.send(ctx, jsonMsg(msgOffer, offer)); err != nil {
		return Sent{}, err
	}
	per := max(1, min(2048, (peerMax-headerLen)/32))
	if peerMax <= 0 {
		per = 2048
	}
	for first := 0; first < n; first += per {
		m := make([]byte, headerLen, headerLen+32*per)
		m[0] = msgHashes
		binary.BigEndian.PutUint32(m[1:], uint32(first))
		for _, h := range st.hashes[first:min(first+per, n)] {
			m = append(m, h[:]...)
		}
		if err := st.send(ctx, m); err != nil {
			return Sent{}, err
		}
	}
	for {
		msg, err := st.in.next(ctx, st.c.IdleTimeout)
		if err != nil {
			return st.sent, err
		}
		switch msg[0] {
		case msgNeed:
			var need Need
			if err := parseJSON(msg, &need); err != nil {
				return st.sent, st.cancel(CodeProtocol, err)
			}
			if err := st.round(ctx, need, buf); err != nil {
				return st.sent, err
			}
		case msgFinal:
			var fin Final
			if err := parseJSON(msg, &fin); err != nil {
				return st.sent, st.cancel(CodeProtocol, err)
			}
			if fin.SHA256 != sum || fin.Size != f.Size {
				return st.sent, fmt.Errorf("rtc: the receiver stored %s (%d bytes), not %s: %w", fin.SHA256, fin.Size, sum, errFrame)
			}
			return st.sent, nil
		case msgCancel:
			var x Cancel
			_ = parseJSON(msg, &x)
			return st.sent, &CancelError{Code: x.Code, Message: x.Message, Remote: true}
		default:
			return st.sent, st.cancel(CodeProtocol, fmt.Errorf("%w: unexpected %q", errFrame, msg[0]))
		}
	}
}

// round sends the blocks of need, then 'E'.
func (st *sendState) round(ctx context.Context, need Need, buf []byte) error {
	st.sent.Rounds++
	n := len(st.hashes)
	for _, r := range need.Ranges {
		if r[0] < 0 || r[1] > n || r[0] >= r[1] {
			return st.cancel(CodeProtocol, fmt.Errorf("%w: need range %v of %d blocks", errFrame, r, n))
		}
		for i := r[0]; i < r[1]; i++ {
			b, err := st.block(i, buf)
			if err != nil {
				return st.cancel(CodeCancelled, err)
			}
			m := blockMsg(i, b)
			if st.s.testCorrupt != nil {
				st.s.testCorrupt(i, m[headerLen:])
			}
			msgs := [][]byte{m}
			if st.s.testBlockMsgs != nil {
				msgs = st.s.testBlockMsgs(i, m)
			}
			for _, m := range msgs {
				if err := st.send(ctx, m); err != nil {
					return err
				}
			}
			st.sent.BlocksSent++
			if st.s.testAfterBlock != nil && st.s.testAfterBlock(i) {
				return fmt.Errorf("rtc: cut by the test after block %d: %w", i, io.ErrUnexpectedEOF)
			}
		}
	}
	return st.send(ctx, []byte{msgEnd})
}

func (st *sendState) block(i int, buf []byte) ([]byte, error) {
	off := int64(i) * int64(st.bs)
	b := buf[:min(int64(st.bs), st.f.Size-off)]
	if _, err := st.f.Data.ReadAt(b, off); err != nil && !(errors.Is(err, io.EOF) && len(b) > 0) {
		return nil, fmt.Errorf("rtc: read %s block %d: %w", st.f.Name, i, err)
	}
	return b, nil
}

// send queues m, first waiting (OnBufferedAmountLow) while more than
// HighWater bytes are queued.
func (st *sendState) send(ctx context.Context, m []byte) error {
	for st.dc.BufferedAmount() > uint64(st.c.HighWater) {
		t := time.NewTimer(st.c.IdleTimeout)
		select {
		case <-st.in.low:
		case <-st.in.closed:
			t.Stop()
			return fmt.Errorf("rtc: data channel closed: %w", io.ErrUnexpectedEOF)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("rtc: sending: %w", ctx.Err())
		case <-t.C:
			return fmt.Errorf("rtc: the receiver took nothing for %v: %w", st.c.IdleTimeout, context.DeadlineExceeded)
		}
		t.Stop()
	}
	if err := st.dc.Send(m); err != nil {
		return fmt.Errorf("rtc: send: %w", err)
	}
	return nil
}

// cancel sends 'X' (best effort) and returns the CancelError.
func (st *sendState) cancel(code string, err error) error {
	_ = st.dc.Send(jsonMsg(msgCancel, Cancel{Code: code, Message: err.Error()}))
	return &CancelError{Code: code, Message: err.Error()}
}

// inbox turns a data channel's callbacks into channels: open, messages
// (bounded; a full inbox holds pion's read loop, which is SCTP flow
// control), buffered-amount-low signals, closed.
type inbox struct {
	open   chan struct{}
	msgs   chan []byte
	low    chan struct{}
	closed chan struct{}
	gone   chan struct{} // closed by stop: the reader left
}

func newInbox(dc *webrtc.DataChannel, lowWater int) *inbox {
	in := &inbox{open: make(chan struct{}), msgs: make(chan []byte, 64), low: make(chan struct{}, 1),
		closed: make(chan struct{}), gone: make(chan struct{})}
	dc.OnOpen(func() { close(in.open) })
	dc.OnClose(func() { close(in.closed) })
	dc.SetBufferedAmountLowThreshold(uint64(lowWater))
	dc.OnBufferedAmountLow(func() {
		select {
		case in.low <- struct{}{}:
		default:
		}
	})
	dc.OnMessage(func(m webrtc.DataChannelMessage) {
		if m.IsString || len(m.Data) == 0 {
			m.Data = []byte{0} // an invalid type: the reader refuses it
		}
		select {
		case in.msgs <- m.Data:
		case <-in.gone:
		}
	})
	return in
}

// next returns the next message, waiting at most idle.
func (in *inbox) next(ctx context.Context, idle time.Duration) ([]byte, error) {
	t := time.NewTimer(idle)
	defer t.Stop()
	select {
	case m := <-in.msgs:
		return m, nil
	case <-in.closed:
		select { // messages that arrived before the close come first
		case m := <-in.msgs:
			return m, nil
		default:
		}
		return nil, fmt.Errorf("rtc: data channel closed: %w", io.ErrUnexpectedEOF)
	case <-ctx.Done():
		return nil, fmt.Errorf("rtc: waiting for a message: %w", ctx.Err())
	case <-t.C:
		return nil, fmt.Errorf("rtc: nothing from the peer for %v: %w", idle, errIdle)
	}
}

func (in *inbox) stop() {
	select {
	case <-in.gone:
	default:
		close(in.gone)
	}
}

var errIdle = errors.New("peer idle")
