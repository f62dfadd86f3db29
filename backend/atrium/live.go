package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/atrium-dev/atrium/backend/live"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// newLive builds the live view service (package live) on the gateway:
// the node's stream answered by rtc.AcceptStream with the ICE rules of
// media transfers (host candidates on the addresses the gateway serves),
// clips saved into App.Media, the same device rule as node.invoke
// (deviceMayInvoke: an operator device scoped admin), views ended when
// their viewer's or node's connection closes.
func (a *App) newLive(log *slog.Logger) error {
	svc, err := live.New(live.Options{
		Gateway: a.Gateway, Nodes: a.Nodes, Store: a.Media, Audit: a.Audit, MayOpen: a.deviceMayInvoke, Logger: log,
		Accept: func(ctx context.Context, peer net.IP, offer string, h live.Hooks) (live.Conn, string, error) {
			s, answer, err := a.acceptStream(ctx, rtc.StreamLabel, peer, offer, rtc.StreamHooks{Message: h.Message, Closed: h.Closed}, live.ErrOffer)
			if err != nil {
				return nil, "", err
			}
			return s, answer, nil
		},
	})
	if err != nil {
		return fmt.Errorf("live: %w", err)
	}
	svc.Register()
	a.Live = svc
	a.onClosed(svc.Disconnected)
	return nil
}

// acceptStream answers an offer of a stream labelled label (a live view's,
// a talk's) with the ICE rules of media transfers: host candidates on the
// addresses the gateway serves. A malformed offer's error wraps both
// rtc.ErrOffer and offerErr (the service's own sentinel).
func (a *App) acceptStream(ctx context.Context, label string, peer net.IP, offer string, h rtc.StreamHooks, offerErr error) (*rtc.Stream, string, error) {
	s, answer, err := rtc.AcceptStream(ctx, rtc.Config{BindIPs: a.servedIPs()}, label, peer, offer, h)
	if errors.Is(err, rtc.ErrOffer) {
		return nil, "", fmt.Errorf("%w: %w", offerErr, err)
	}
	return s, answer, err
}
