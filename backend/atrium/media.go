package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/pairing"
	"github.com/atrium-dev/atrium/backend/rtc"
	"github.com/atrium-dev/atrium/backend/upload"
)

// mediaRelay is nodes.MediaReceiver over the two paths a media file takes
// to the app's store (App.Media, $ATRIUM_HOME/media): an rtc.Receiver (a
// WebRTC data channel) and the HTTPS upload fallback (upload.Server, which
// takes its tickets from here: upload.Tickets). It turns tickets, errors
// and outcomes between the packages, so that nodes knows neither. One
// ticket, two paths: whichever stores the file first ends the ticket, and
// the other is refused from then on; while an upload holds a ticket an
// offer for it is refused, while the data channel holds the partial file
// the upload is refused BUSY (the store's bound on a transfer id). A
// ticket that ends without a file (refused, aborted, expired) leaves
// nothing: its partial is discarded. The receiver is made at the first
// transfer, when the listeners are up: ICE offers host candidates on the
// addresses the gateway serves (127.0.0.1 and the LAN listeners'
// addresses) and nowhere else.
type mediaRelay struct {
	store  *media.Store
	bind   func() []net.IP
	log    *slog.Logger
	stored func(ctx context.Context, m media.Meta) media.Meta // the app's step after a file is stored (App.mediaStored)
	begun  func(id string)                                    // an upload took ticket id (nodes.Service.MediaBegun)

	mu      sync.Mutex
	r       *rtc.Receiver
	closed  bool
	tickets map[string]*relayTicket
}

// relayTicket is one expected transfer and its end.
type relayTicket struct {
	m      *mediaRelay
	t      nodes.MediaTicket
	tr     *rtc.Transfer
	ctx    context.Context // ends with the ticket
	cancel context.CancelFunc
	done   chan struct{}

	// under m.mu
	https bool // an upload holds it
	over  bool
	meta  media.Meta
	err   error
}

func (m *mediaRelay) receiver() (*rtc.Receiver, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, rtc.ErrClosed
	}
	if m.r == nil {
		m.r = rtc.NewReceiver(m.store, rtc.Config{BindIPs: m.bind()}, m.log)
	}
	if m.tickets == nil {
		m.tickets = map[string]*relayTicket{}
	}
	return m.r, nil
}

func (m *mediaRelay) Expect(t nodes.MediaTicket) (nodes.MediaTransfer, error) {
	r, err := m.receiver()
	if err != nil {
		return nil, err
	}
	if t.Deadline.IsZero() {
		t.Deadline = time.Now().Add(rtc.DefaultTransferTimeout)
	}
	tr, err := r.Expect(rtc.Ticket{ID: t.ID, Device: t.Device, Command: t.Command, MaxSize: t.MaxSize, Deadline: t.Deadline, PeerIP: t.PeerIP})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), t.Deadline)
	rt := &relayTicket{m: m, t: t, tr: tr, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.tickets[t.ID] = rt
	m.mu.Unlock()
	go func() { // the data channel's end (bounded by the ticket's deadline)
		out, err := tr.Wait(context.Background())
		rt.channelEnded(out, err)
	}()
	context.AfterFunc(ctx, func() {
		rt.finish(media.Meta{}, &nodes.MediaError{Code: rtc.CodeTimeout, Message: "the transfer did not finish in time"})
	})
	return rt, nil
}

// channelEnded: the data channel stored the file, or gave up. Its failure
// ends the ticket unless an upload holds it (the node fell back).
func (rt *relayTicket) channelEnded(out rtc.Outcome, err error) {
	var ce *rtc.CancelError
	switch {
	case err == nil:
		rt.finish(out.Meta, nil)
		return
	case errors.As(err, &ce):
		err = &nodes.MediaError{Code: ce.Code, Message: ce.Message}
	}
	rt.m.mu.Lock()
	https := rt.https
	rt.m.mu.Unlock()
	if https && rt.ctx.Err() == nil {
		rt.m.log.Info("media: the data channel gave up, the upload goes on", "id", rt.t.ID, "err", err)
		return
	}
	rt.finish(media.Meta{}, err)
}

// finish ends the ticket once (the first end wins): the waiting invoke
// gets meta or err, the other path is stopped, and a ticket ended without
// a file leaves no partial.
func (rt *relayTicket) finish(meta media.Meta, err error) bool {
	m := rt.m
	m.mu.Lock()
	if rt.over {
		m.mu.Unlock()
		return false
	}
	rt.over, rt.meta, rt.err = true, meta, err
	if m.tickets[rt.t.ID] == rt {
		delete(m.tickets, rt.t.ID)
	}
	m.mu.Unlock()
	rt.cancel()   // an upload holding it ends (its partial removed)
	rt.tr.Abort() // the data channel's connection closes (a no-op once it ended)
	if err != nil {
		if derr := m.store.Discard(rt.t.ID); derr != nil && !errors.Is(derr, media.ErrBusy) {
			m.log.Warn("media: discard a transfer's partial", "id", rt.t.ID, "err", derr)
		}
	}
	close(rt.done)
	return true
}

func (rt *relayTicket) Abort() {
	rt.finish(media.Meta{}, &nodes.MediaError{Code: rtc.CodeCancelled, Message: "the transfer was aborted"})
}

func (rt *relayTicket) Wait(ctx context.Context) (nodes.Media, error) {
	select {
	case <-rt.done:
	case <-ctx.Done():
		return nodes.Media{}, fmt.Errorf("media: waiting for transfer %s: %w", rt.t.ID, ctx.Err())
	}
	rt.m.mu.Lock()
	meta, err := rt.meta, rt.err
	rt.m.mu.Unlock()
	if err != nil {
		return nodes.Media{}, err
	}
	if rt.m.stored != nil {
		meta = rt.m.stored(ctx, meta)
	}
	p, err := rt.m.store.Path(meta.ID)
	if err != nil {
		return nodes.Media{}, fmt.Errorf("media %s: %w", meta.ID, err)
	}
	return nodes.Media{Meta: meta, Path: p}, nil
}

func (m *mediaRelay) Answer(ctx context.Context, device, id, offerSDP string) (string, error) {
	r, err := m.receiver()
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	rt := m.tickets[id]
	https := rt != nil && rt.https
	m.mu.Unlock()
	if https {
		return "", fmt.Errorf("%w: transfer %s is being uploaded over HTTPS", nodes.ErrMediaUnrequested, id)
	}
	sdp, err := r.Answer(ctx, device, id, offerSDP)
	switch {
	case errors.Is(err, rtc.ErrUnrequested):
		return "", fmt.Errorf("%w: %w", nodes.ErrMediaUnrequested, err)
	case errors.Is(err, rtc.ErrOffer):
		return "", fmt.Errorf("%w: %w", nodes.ErrMediaOffer, err)
	}
	return sdp, err
}

// Take is upload.Tickets.Take: device's live ticket id, not held by
// another upload.
func (m *mediaRelay) Take(device, id string) (upload.Ticket, context.Context, error) {
	m.mu.Lock()
	rt := m.tickets[id]
	var err error
	switch {
	case rt == nil || rt.over || rt.t.Device != device:
		err = fmt.Errorf("media: transfer %s: %w", id, upload.ErrUnrequested)
	case rt.https:
		err = fmt.Errorf("media: transfer %s: %w", id, upload.ErrTaken)
	default:
		rt.https = true
	}
	m.mu.Unlock()
	if err != nil {
		return upload.Ticket{}, nil, err
	}
	if m.begun != nil {
		m.begun(id) // after m.mu: nodes takes its own lock
	}
	t := rt.t
	return upload.Ticket{ID: t.ID, Device: t.Device, Command: t.Command, MaxSize: t.MaxSize, Deadline: t.Deadline, PeerIP: t.PeerIP}, rt.ctx, nil
}

// Let is upload.Tickets.Let.
func (m *mediaRelay) Let(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rt := m.tickets[id]; rt != nil {
		rt.https = false
	}
}

// Stored is upload.Tickets.Stored.
func (m *mediaRelay) Stored(id string, meta media.Meta) error {
	m.mu.Lock()
	rt := m.tickets[id]
	m.mu.Unlock()
	if rt == nil || !rt.finish(meta, nil) {
		return fmt.Errorf("media: transfer %s ended before the upload stored it: %w", id, upload.ErrUnrequested)
	}
	return nil
}

// Failed is upload.Tickets.Failed.
func (m *mediaRelay) Failed(id, code, message string) {
	m.mu.Lock()
	rt := m.tickets[id]
	m.mu.Unlock()
	if rt != nil {
		rt.finish(media.Meta{}, &nodes.MediaError{Code: code, Message: message})
	}
}

// Close aborts the expected transfers; the store stays open (App.Close
// closes it).
func (m *mediaRelay) Close() {
	m.mu.Lock()
	m.closed = true
	r := m.r
	all := make([]*relayTicket, 0, len(m.tickets))
	for _, rt := range m.tickets {
		all = append(all, rt)
	}
	m.mu.Unlock()
	for _, rt := range all {
		rt.Abort()
	}
	if r != nil {
		r.Close()
	}
}

// newUploads makes the HTTPS upload fallback over the relay's tickets:
// a node device's token is checked by pairing (role node), refusals are
// audited as "media.upload" with target "<deviceId> <transferId>". edit,
// when set, changes the options first (tests shorten the bounds).
func (a *App) newUploads(log *slog.Logger, edit func(*upload.Options)) (*upload.Server, error) {
	o := upload.Options{
		Store:   a.Media,
		Tickets: a.mediaRx,
		Authenticate: func(ctx context.Context, device, token string) error {
			_, err := a.Pairing.CheckToken(ctx, device, "node", token)
			switch {
			case errors.Is(err, pairing.ErrNotPaired), errors.Is(err, pairing.ErrTokenMismatch):
				return fmt.Errorf("device %s: %w", device, upload.ErrUnauthorized)
			case err != nil:
				return fmt.Errorf("check device %s: %w", device, err)
			}
			return nil
		},
		Refused: func(rf upload.Refusal) {
			role := "unauthenticated"
			if rf.Verified {
				role = "node/device:" + rf.Device
			}
			reason := rf.Reason
			if rf.Code != "" {
				reason = rf.Code + ": " + reason
			}
			if a.Audit == nil {
				return
			}
			if err := a.Audit.Record(audit.Entry{Operation: "media.upload", Role: role, Target: rf.Device + " " + rf.ID,
				Result: audit.Denied, Reason: fmt.Sprintf("HTTP %d %s", rf.Status, reason), IP: rf.RemoteIP}); err != nil {
				log.Error("media upload audit failed", "err", err)
			}
		},
		Log: log,
	}
	if edit != nil {
		edit(&o)
	}
	return upload.New(o)
}

// serveUpload is the gateway's Options.Upload: the upload server once the
// nodes service is up, else 503.
func (a *App) serveUpload(w http.ResponseWriter, r *http.Request) {
	u := a.uploads.Load()
	if u == nil {
		w.Header().Set("Connection", "close")
		http.Error(w, "media uploads are not taken yet", http.StatusServiceUnavailable)
		return
	}
	u.ServeHTTP(w, r)
}

// mediaStored is the app's step after a node's file was stored, whatever
// carried it, before node.invoke returns it: a WebM clip or recording is
// remuxed by ffmpeg (media.FFmpegRemux, bounded by ctx and
// media.DefaultRemuxTimeout) when ffmpeg is there, so that it names its
// duration and can be seeked; without ffmpeg, or when the remux fails
// (logged), the file stays as the node sent it. Then the operator
// connections hear media.added with the sidecar (the gallery shows it; the
// device filter withholds it from a device scoped below admin, as
// media.list refuses it). It returns the sidecar as it is now.
func (a *App) mediaStored(ctx context.Context, m media.Meta) media.Meta {
	if media.NeedsRemux(m.MIME) {
		if ff := a.ffmpeg(); ff != "" {
			nm, err := a.Media.Rewrite(ctx, m.ID, media.FFmpegRemux(ff))
			if err != nil {
				a.log.Warn("media: remux of a clip failed, kept as sent", "id", m.ID, "err", err)
			} else {
				m = nm
			}
		}
	}
	a.Gateway.Broadcast(api.EventMediaAdded, m)
	return m
}

// ffmpeg is Options.FFmpeg, looked up on PATH once when "" ("" when there
// is none, or Options.FFmpeg is "none").
func (a *App) ffmpeg() string {
	a.ffmpegOnce.Do(func() {
		switch a.ffmpegOpt {
		case "none":
		case "":
			a.ffmpegPath, _ = exec.LookPath("ffmpeg")
		default:
			a.ffmpegPath = a.ffmpegOpt
		}
	})
	return a.ffmpegPath
}

// servedIPs are the addresses the gateway listens on: 127.0.0.1 and the
// LAN listeners'.
func (a *App) servedIPs() []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, ad := range a.lan.addrs {
		ips = append(ips, net.IP(ad.AsSlice()))
	}
	return ips
}
