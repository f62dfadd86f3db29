package rtc

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/atrium-dev/atrium/backend/media"
)

// Sentinel errors of the receiving side.
var (
	// ErrUnrequested: an offer for a transfer nobody asked for (no live
	// Ticket with that id, or it was asked of another device).
	ErrUnrequested = errors.New("media transfer not requested")
	// ErrOffer: the SDP offer has no single SHA-256 DTLS fingerprint.
	ErrOffer = errors.New("invalid media SDP offer")
	// ErrClosed: the Receiver was closed.
	ErrClosed = errors.New("media receiver closed")
)

// lingerTimeout bounds how long a receiver keeps a connection open after
// its last message, for the sender to read it and close.
const lingerTimeout = 5 * time.Second

// DefaultTransferTimeout is a Ticket's life when it sets no Deadline.
const DefaultTransferTimeout = 10 * time.Minute

// Ticket is a transfer the gateway asked a node for (in node.invoke's
// params): only that device may offer it, until Deadline.
type Ticket struct {
	ID       string    // media.NewID(); also the stored media's id
	Device   string    // the device id of the node asked
	Command  string    // the node command, e.g. "camera.snap"
	MaxSize  int64     // bytes (0: the store's MaxFileSize)
	Deadline time.Time // end of the whole transfer, resumes included (zero: now + DefaultTransferTimeout)
	// PeerIP is the remote address of the node's gateway connection: ICE
	// checks go to, and are answered from, this address only, so an offer
	// cannot make the gateway probe other hosts (nil: any unicast address).
	PeerIP net.IP
}

// ConnStats is what one connection of a transfer did.
type ConnStats struct {
	Fingerprint string // the DTLS fingerprint of its offer ("sha-256 AB:CD:…")
	Resumed     int    // blocks already stored when it started
	Received    int    // blocks it stored
	Corrupt     int    // blocks refused for their checksum (asked again)
	Rounds      int    // need/end rounds
}

// Outcome is a finished transfer.
type Outcome struct {
	Meta  media.Meta
	Conns []ConnStats // in order; all but the last were cut
}

// Receiver answers offers for expected transfers and stores what arrives
// in a media.Store. Safe for concurrent use.
type Receiver struct {
	cfg   Config
	store *media.Store
	log   *slog.Logger

	mu      sync.Mutex
	tickets map[string]*Transfer
	closed  bool
}

// NewReceiver makes a Receiver storing into store; log nil: slog.Default().
func NewReceiver(store *media.Store, cfg Config, log *slog.Logger) *Receiver {
	if log == nil {
		log = slog.Default()
	}
	return &Receiver{cfg: cfg.withDefaults(), store: store, log: log, tickets: map[string]*Transfer{}}
}

// Transfer is an expected transfer, from Expect until it ends.
type Transfer struct {
	r      *Receiver
	t      Ticket
	ctx    context.Context // ends at the deadline or on Abort
	cancel context.CancelFunc
	done   chan struct{}

	stored atomic.Int64 // blocks stored (Progress)
	total  atomic.Int64 // blocks in the file, once the offer came

	mu   sync.Mutex
	conn *conn // the current connection
	out  Outcome
	err  error
	over bool
}

type conn struct {
	pc   *webrtc.PeerConnection
	fp   string
	loop chan struct{} // closed when its serve ends; nil until it starts
	got  bool          // a data channel was taken
	// connect closes the connection when its channel does not open within
	// Config.ConnectTimeout; set before the conn is shared, stopped when
	// the channel is taken or the connection closed, so that it does not
	// hold a dead connection (its SCTP and DTLS state) until it fires.
	connect *time.Timer
}

// close ends the connection and stops its connect timer. Safe to call
// more than once.
func (cn *conn) close() {
	if cn.connect != nil {
		cn.connect.Stop()
	}
	_ = cn.pc.Close()
}

// Expect registers t; from now until its deadline the device may offer it.
// Errors: media.ErrInvalid (a malformed id, a known one or no device),
// media.ErrBusy (Config.MaxTickets expected already), ErrClosed.
func (r *Receiver) Expect(t Ticket) (*Transfer, error) {
	if !media.ValidID(t.ID) || t.Device == "" || t.Command == "" {
		return nil, fmt.Errorf("rtc: ticket %q: %w", t.ID, media.ErrInvalid)
	}
	if t.Deadline.IsZero() {
		t.Deadline = time.Now().Add(DefaultTransferTimeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if _, ok := r.tickets[t.ID]; ok {
		return nil, fmt.Errorf("rtc: ticket %s already expected: %w", t.ID, media.ErrInvalid)
	}
	if len(r.tickets) >= r.cfg.MaxTickets {
		return nil, fmt.Errorf("rtc: %d transfers expected already: %w", len(r.tickets), media.ErrBusy)
	}
	ctx, cancel := context.WithDeadline(context.Background(), t.Deadline)
	tr := &Transfer{r: r, t: t, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	r.tickets[t.ID] = tr
	go func() { // the deadline or Abort ends the transfer
		<-ctx.Done()
		tr.finish(Outcome{}, &CancelError{Code: CodeTimeout, Message: "the transfer did not finish in time"})
	}()
	return tr, nil
}

// Wait returns when the transfer ends: stored (its Outcome), refused or
// failed (*CancelError), expired (CancelError with CodeTimeout), aborted.
func (tr *Transfer) Wait(ctx context.Context) (Outcome, error) {
	select {
	case <-tr.done:
	case <-ctx.Done():
		return Outcome{}, fmt.Errorf("rtc: waiting for transfer %s: %w", tr.t.ID, ctx.Err())
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.out, tr.err
}

// Progress is the blocks stored so far (resumed ones included) and the
// blocks of the file (0 before its offer came), for a progress display.
func (tr *Transfer) Progress() (stored, total int) {
	return int(tr.stored.Load()), int(tr.total.Load())
}

// ID is the transfer's id.
func (tr *Transfer) ID() string { return tr.t.ID }

// Abort ends the transfer (the gateway gave up): its connection is closed
// and its partial data removed.
func (tr *Transfer) Abort() {
	tr.finish(Outcome{}, &CancelError{Code: CodeCancelled, Message: "the transfer was aborted"})
}

// finish ends tr once; the first call wins.
func (tr *Transfer) finish(out Outcome, err error) {
	tr.mu.Lock()
	if tr.over {
		tr.mu.Unlock()
		return
	}
	tr.over = true
	tr.out.Meta = out.Meta
	tr.err = err
	cn := tr.conn
	var loop chan struct{}
	if cn != nil {
		loop = cn.loop
	}
	tr.mu.Unlock()
	tr.cancel()
	if cn != nil {
		cn.close()
	}
	if loop != nil {
		<-loop // serve removes the partial before Wait returns
	}
	tr.r.mu.Lock()
	delete(tr.r.tickets, tr.t.ID)
	tr.r.mu.Unlock()
	close(tr.done)
}

// Close aborts every expected transfer.
func (r *Receiver) Close() {
	r.mu.Lock()
	r.closed = true
	all := make([]*Transfer, 0, len(r.tickets))
	for _, tr := range r.tickets {
		all = append(all, tr)
	}
	r.mu.Unlock()
	for _, tr := range all {
		tr.Abort()
	}
}

// Answer takes device's SDP offer for transfer id and returns the SDP
// answer (non-trickle: every candidate in it). A connection of this
// transfer still open is closed first: the new one resumes it. Errors:
// ErrUnrequested, ErrOffer, ctx's, pion's.
func (r *Receiver) Answer(ctx context.Context, device, id, offerSDP string) (string, error) {
	r.mu.Lock()
	tr := r.tickets[id]
	r.mu.Unlock()
	if tr == nil || tr.t.Device != device {
		return "", fmt.Errorf("rtc: offer for transfer %q: %w", id, ErrUnrequested)
	}
	fp, err := fingerprint(offerSDP)
	if err != nil {
		return "", err
	}
	tr.mu.Lock()
	old, over := tr.conn, tr.over
	var oldLoop chan struct{}
	if old != nil {
		oldLoop = old.loop
		tr.conn = nil // its channel, if not yet taken, is refused
	}
	tr.mu.Unlock()
	if over {
		return "", fmt.Errorf("rtc: offer for transfer %q: %w", id, ErrUnrequested)
	}
	if old != nil {
		old.close()
		if oldLoop != nil {
			select {
			case <-oldLoop:
			case <-ctx.Done():
				return "", fmt.Errorf("rtc: closing the previous connection: %w", ctx.Err())
			}
		}
	}
	pc, err := r.cfg.newPC(tr.t.PeerIP)
	if err != nil {
		return "", err
	}
	cn := &conn{pc: pc, fp: fp}
	pc.OnDataChannel(func(dc *webrtc.DataChannel) { tr.take(cn, dc) })
	pc.OnConnectionStateChange(func(s webrtc.PeerConnectionState) {
		if s == webrtc.PeerConnectionStateFailed {
			_ = pc.Close()
		}
	})
	tr.mu.Lock()
	if tr.over {
		tr.mu.Unlock()
		_ = pc.Close()
		return "", fmt.Errorf("rtc: offer for transfer %q: %w", id, ErrUnrequested)
	}
	// A connection whose channel does not open in time is closed.
	cn.connect = time.AfterFunc(r.cfg.ConnectTimeout, func() {
		tr.mu.Lock()
		got := cn.got
		tr.mu.Unlock()
		if !got {
			_ = pc.Close()
		}
	})
	tr.conn = cn
	tr.mu.Unlock()
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offerSDP}); err != nil {
		cn.close()
		return "", fmt.Errorf("rtc: set offer: %w: %w", ErrOffer, err)
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		cn.close()
		return "", fmt.Errorf("rtc: answer: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.ConnectTimeout)
	defer cancel()
	sdp, err := gather(cctx, pc, answer)
	if err != nil {
		cn.close()
		return "", err
	}
	return sdp, nil
}

// take accepts the connection's one media channel and serves it.
func (tr *Transfer) take(cn *conn, dc *webrtc.DataChannel) {
	tr.mu.Lock()
	if dc.Label() != ChannelLabel || cn.got || tr.over || tr.conn != cn {
		tr.mu.Unlock()
		_ = dc.Close()
		return
	}
	cn.got = true
	cn.connect.Stop() // open: the idle and transfer bounds take over
	cn.loop = make(chan struct{})
	in := newInbox(dc, tr.r.cfg.LowWater)
	tr.mu.Unlock()
	go tr.serve(cn, dc, in)
}

// serve runs one connection: on success the transfer finishes; on a
// refusal the partial is removed and the transfer finishes with the
// refusal; on a cut (channel closed, peer idle) the partial is kept for a
// resume while the ticket lives.
func (tr *Transfer) serve(cn *conn, dc *webrtc.DataChannel, in *inbox) {
	st := ConnStats{Fingerprint: cn.fp}
	var part *media.Partial
	meta, err, terminal := tr.receive(dc, in, &st, &part)
	in.stop() // from now on messages are dropped
	if err == nil || terminal {
		// The last word ('F' or 'X') is queued: let the sender read it and
		// close its side, for at most lingerTimeout.
		t := time.NewTimer(lingerTimeout)
		select {
		case <-in.closed:
		case <-t.C:
		}
		t.Stop()
	}
	cn.close()
	switch {
	case err == nil:
	case terminal || tr.ctx.Err() != nil:
		if part != nil {
			part.Cancel()
		}
	default:
		if part != nil {
			if rerr := part.Release(); rerr != nil {
				tr.r.log.Warn("rtc: suspend transfer", "id", tr.t.ID, "err", rerr)
			}
		}
		tr.r.log.Info("rtc: transfer cut, waiting for a resume", "id", tr.t.ID, "received", st.Received, "err", err)
	}
	tr.mu.Lock()
	tr.out.Conns = append(tr.out.Conns, st)
	tr.mu.Unlock()
	close(cn.loop)
	switch {
	case err == nil:
		tr.finish(Outcome{Meta: meta}, nil)
	case terminal:
		tr.finish(Outcome{}, err)
	}
}

// receive speaks the receiver's side of the framing. terminal: the
// transfer cannot go on (a refusal, a protocol violation, its deadline).
func (tr *Transfer) receive(dc *webrtc.DataChannel, in *inbox, st *ConnStats, part **media.Partial) (media.Meta, error, bool) {
	c, ctx := tr.r.cfg, tr.ctx
	refuse := func(code string, err error) (media.Meta, error, bool) {
		_ = dc.Send(jsonMsg(msgCancel, Cancel{Code: code, Message: err.Error()}))
		return media.Meta{}, &CancelError{Code: code, Message: err.Error()}, true
	}
	next := func() ([]byte, error, bool) {
		m, err := in.next(ctx, c.IdleTimeout)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &CancelError{Code: CodeTimeout, Message: "the transfer did not finish in time"}, true
			}
			return nil, err, false
		}
		return m, nil, false
	}
	msg, err, term := next()
	if err != nil {
		return media.Meta{}, err, term
	}
	var o Offer
	if msg[0] != msgOffer {
		return refuse(CodeProtocol, fmt.Errorf("%w: %q before the offer", errFrame, msg[0]))
	}
	if err := parseJSON(msg, &o); err != nil {
		return refuse(CodeProtocol, err)
	}
	sum, herr := hex.DecodeString(o.SHA256)
	switch {
	case o.V != Version || o.ID != tr.t.ID:
		return refuse(CodeInvalid, fmt.Errorf("offer for transfer %q (v%d), expected %s (v%d)", o.ID, o.V, tr.t.ID, Version))
	case tr.t.MaxSize > 0 && o.Size > tr.t.MaxSize:
		return refuse(CodeTooLarge, fmt.Errorf("%d bytes, the limit is %d: %w", o.Size, tr.t.MaxSize, media.ErrTooLarge))
	case herr != nil || len(sum) != 32:
		return refuse(CodeInvalid, fmt.Errorf("file sha256 %q", o.SHA256))
	case o.BlockSize < media.MinBlockSize || o.BlockSize+headerLen > int(c.MaxMessageSize) ||
		o.Blocks != media.NumBlocks(o.Size, o.BlockSize) || o.Blocks > media.MaxBlocks:
		return refuse(CodeInvalid, fmt.Errorf("%d blocks of %d bytes for %d bytes (messages up to %d)", o.Blocks, o.BlockSize, o.Size, c.MaxMessageSize))
	}
	if o.Size > tr.r.store.MaxFileSize() { // before reading the hashes
		return refuse(CodeTooLarge, fmt.Errorf("%d bytes, the limit is %d: %w", o.Size, tr.r.store.MaxFileSize(), media.ErrTooLarge))
	}
	plan := media.Plan{ID: o.ID, Device: tr.t.Device, Command: tr.t.Command, Name: o.Name, Size: o.Size,
		BlockSize: o.BlockSize, Blocks: make([][32]byte, 0, o.Blocks), MIME: o.MIME, Width: o.Width,
		Height: o.Height, DurationMs: o.DurationMs, Transport: media.TransportWebRTC}
	copy(plan.SHA256[:], sum)
	for len(plan.Blocks) < o.Blocks {
		msg, err, term := next()
		if err != nil {
			return media.Meta{}, err, term
		}
		first, hs, ierr := indexed(msg)
		if msg[0] != msgHashes || ierr != nil || first != len(plan.Blocks) || len(hs)%32 != 0 || len(hs) == 0 ||
			first+len(hs)/32 > o.Blocks {
			return refuse(CodeProtocol, fmt.Errorf("%w: expected the hashes from block %d", errFrame, len(plan.Blocks)))
		}
		for k := 0; k < len(hs); k += 32 {
			plan.Blocks = append(plan.Blocks, [32]byte(hs[k:k+32]))
		}
	}
	p, err := tr.r.store.Begin(plan)
	if err != nil {
		return refuse(media.Code(err), err)
	}
	*part = p
	st.Resumed = p.Resumed()
	tr.total.Store(int64(o.Blocks))
	tr.stored.Store(int64(o.Blocks - p.MissingCount()))
	want := make([]bool, o.Blocks)
	for {
		miss := p.Missing()
		if len(miss) == 0 {
			meta, err := p.Commit()
			if err != nil {
				return refuse(media.Code(err), err)
			}
			if err := dc.Send(jsonMsg(msgFinal, Final{ID: meta.ID, Size: meta.Size, SHA256: meta.SHA256})); err != nil {
				tr.r.log.Warn("rtc: send final", "id", meta.ID, "err", err)
			}
			return meta, nil, false
		}
		if st.Rounds >= c.MaxRounds {
			return refuse(CodeProtocol, fmt.Errorf("still %d blocks missing after %d rounds", len(miss), st.Rounds))
		}
		st.Rounds++
		for _, i := range miss {
			want[i] = true
		}
		if err := dc.Send(jsonMsg(msgNeed, Need{Ranges: ranges(miss)})); err != nil {
			return media.Meta{}, fmt.Errorf("rtc: send need: %w", err), false
		}
	round:
		for {
			msg, err, term := next()
			if err != nil {
				return media.Meta{}, err, term
			}
			switch msg[0] {
			case msgBlock:
				i, data, err := indexed(msg)
				if err != nil {
					return refuse(CodeProtocol, err)
				}
				if i >= len(want) || !want[i] {
					return refuse(CodeUnrequestedBlock, fmt.Errorf("block %d was not asked for in this round", i))
				}
				want[i] = false
				switch err := p.WriteBlock(i, data); {
				case errors.Is(err, media.ErrBlockChecksum):
					st.Corrupt++
				case err != nil:
					return refuse(media.Code(err), err)
				default:
					st.Received++
					tr.stored.Add(1)
				}
			case msgEnd:
				clear(want)
				break round
			case msgCancel:
				var x Cancel
				_ = parseJSON(msg, &x)
				return media.Meta{}, &CancelError{Code: x.Code, Message: x.Message, Remote: true}, true
			default:
				return refuse(CodeProtocol, fmt.Errorf("%w: unexpected %q", errFrame, msg[0]))
			}
		}
	}
}

// fingerprint returns the one DTLS fingerprint of an SDP ("sha-256
// AB:CD:…"); several different ones, none, or another hash is ErrOffer.
func fingerprint(sdp string) (string, error) {
	fp := ""
	for line := range strings.SplitSeq(sdp, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "a=fingerprint:")
		if !ok {
			continue
		}
		v = strings.ToLower(v)
		if !strings.HasPrefix(v, "sha-256 ") || (fp != "" && fp != v) {
			return "", fmt.Errorf("rtc: fingerprint %q: %w", v, ErrOffer)
		}
		fp = v
	}
	if fp == "" {
		return "", fmt.Errorf("rtc: no DTLS fingerprint: %w", ErrOffer)
	}
	return fp, nil
}
