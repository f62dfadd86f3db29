package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"sync"

	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// mediaRelay is nodes.MediaReceiver over an rtc.Receiver storing into the
// app's media store (App.Media, $ATRIUM_HOME/media): it turns tickets, errors and
// outcomes between the two packages, so that nodes knows no WebRTC. The
// receiver is made at the first transfer, when the listeners are up: ICE
// offers host candidates on the addresses the gateway serves (127.0.0.1
// and the LAN listeners' addresses) and nowhere else.
type mediaRelay struct {
	store  *media.Store
	bind   func() []net.IP
	log    *slog.Logger
	stored func(ctx context.Context, m media.Meta) media.Meta // the app's step after a file is stored (App.mediaStored)

	mu     sync.Mutex
	r      *rtc.Receiver
	closed bool
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
	return m.r, nil
}

func (m *mediaRelay) Expect(t nodes.MediaTicket) (nodes.MediaTransfer, error) {
	r, err := m.receiver()
	if err != nil {
		return nil, err
	}
	tr, err := r.Expect(rtc.Ticket{ID: t.ID, Device: t.Device, Command: t.Command, MaxSize: t.MaxSize, Deadline: t.Deadline, PeerIP: t.PeerIP})
	if err != nil {
		return nil, err
	}
	return relayTransfer{tr: tr, store: m.store, stored: m.stored}, nil
}

func (m *mediaRelay) Answer(ctx context.Context, device, id, offerSDP string) (string, error) {
	r, err := m.receiver()
	if err != nil {
		return "", err
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

// Close aborts the expected transfers; the store stays open (App.Close
// closes it).
func (m *mediaRelay) Close() {
	m.mu.Lock()
	m.closed = true
	r := m.r
	m.mu.Unlock()
	if r != nil {
		r.Close()
	}
}

type relayTransfer struct {
	tr     *rtc.Transfer
	store  *media.Store
	stored func(ctx context.Context, m media.Meta) media.Meta
}

func (t relayTransfer) Abort() { t.tr.Abort() }

func (t relayTransfer) Wait(ctx context.Context) (nodes.Media, error) {
	out, err := t.tr.Wait(ctx)
	var ce *rtc.CancelError
	switch {
	case errors.As(err, &ce):
		return nodes.Media{}, &nodes.MediaError{Code: ce.Code, Message: ce.Message}
	case err != nil:
		return nodes.Media{}, err
	}
	meta := out.Meta
	if t.stored != nil {
		meta = t.stored(ctx, meta)
	}
	p, err := t.store.Path(meta.ID)
	if err != nil {
		return nodes.Media{}, fmt.Errorf("media %s: %w", meta.ID, err)
	}
	return nodes.Media{Meta: meta, Path: p}, nil
}

// mediaStored is the app's step after a node's file was stored, whatever
// carried it, before node.invoke returns it: a WebM clip or recording is
// remuxed by ffmpeg (media.FFmpegRemux, bounded by ctx and
// media.DefaultRemuxTimeout) when ffmpeg is there, so that it names its
// duration and can be seeked; without ffmpeg, or when the remux fails
// (logged), the file stays as the node sent it. It returns the sidecar
// as it is now.
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
