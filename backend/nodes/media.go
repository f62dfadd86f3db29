package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
)

// Media methods and events (docs/PROTOCOL.md "Media transfers").
const (
	// MethodMediaOffer: a node's SDP offer for a transfer it was asked for.
	MethodMediaOffer = "node.media.offer"
	// EventMediaCancel goes to the node connection of a transfer the
	// gateway gave up: {transferId, code}.
	EventMediaCancel = "node.media.cancel"
)

// MaxOfferSDP caps node.media.offer's sdp (bytes): an offer with a
// handful of host candidates is 1–3 KB.
const MaxOfferSDP = 64 << 10

// Sentinel errors a [MediaReceiver] wraps, so that node.media.offer
// answers the right code.
var (
	// ErrMediaUnrequested: an offer for a transfer nobody expects (unknown,
	// finished, expired, or asked of another device); FORBIDDEN.
	ErrMediaUnrequested = errors.New("media transfer not requested")
	// ErrMediaOffer: a malformed SDP offer; INVALID_REQUEST.
	ErrMediaOffer = errors.New("invalid media SDP offer")
)

// IsMediaCommand reports whether a node command's result is a file that
// travels as a media transfer (SPEC §7, issue 22): camera.snap,
// camera.clip, screen.snapshot, screen.record.
func IsMediaCommand(command string) bool {
	switch command {
	case "camera.snap", "camera.clip", "screen.snapshot", "screen.record":
		return true
	}
	return false
}

// MediaTicket is a transfer the gateway asks a node for (the wiring makes
// it an rtc.Ticket): only Device may offer it, from PeerIP, until Deadline,
// at most MaxSize bytes (0: the store's limit).
type MediaTicket struct {
	ID       string // media.NewID()
	Device   string // the node's id (its deviceId, or local:<connId>)
	Command  string
	MaxSize  int64
	Deadline time.Time
	PeerIP   net.IP // the remote address of the node's connection (nil: unknown)
}

// MediaReceiver takes media transfers for the gateway; the wiring's
// adapter over *rtc.Receiver implements it (this package knows no
// WebRTC). Expect errors wrap media.ErrBusy when too many transfers are
// expected; Answer's wrap ErrMediaUnrequested or ErrMediaOffer.
type MediaReceiver interface {
	Expect(t MediaTicket) (MediaTransfer, error)
	Answer(ctx context.Context, device, id, offerSDP string) (answerSDP string, err error)
}

// MediaTransfer is one expected transfer.
type MediaTransfer interface {
	// Wait returns the stored file once the transfer ends; a refused or
	// failed transfer is a *MediaError, ctx ending ctx's error.
	Wait(ctx context.Context) (Media, error)
	// Abort ends the transfer and removes its partial data.
	Abort()
}

// MediaError is a transfer that ended without a stored file: Code as the
// transport says it (TOO_LARGE, BUSY, DISK_FULL, TIMEOUT, CANCELLED, …).
type MediaError struct {
	Code    string
	Message string
}

func (e *MediaError) Error() string { return fmt.Sprintf("media transfer: %s (%s)", e.Message, e.Code) }

// Media is node.invoke's media: the stored file's sidecar and its
// absolute path on the gateway's machine.
type Media struct {
	media.Meta
	Path string `json:"path"`
}

// transferParams is what a media command's node.invoke.request params get
// as "transfer".
type transferParams struct {
	ID      string `json:"id"`
	MaxSize int64  `json:"maxSize"`
}

// expectMedia makes inv's transfer ticket and returns params with
// transfer:{id, maxSize} set (a caller's own "transfer" is replaced).
func (s *Service) expectMedia(inv *pendingInvoke, params json.RawMessage, deadline time.Time) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: params must be a JSON object")
	}
	maxSize := s.o.MaxMediaBytes
	t := MediaTicket{ID: media.NewID(), Device: inv.nodeID, Command: inv.command, MaxSize: maxSize,
		Deadline: deadline, PeerIP: net.ParseIP(inv.peerIP)}
	tr, err := s.o.Media.Expect(t)
	if err != nil {
		if errors.Is(err, media.ErrBusy) {
			return nil, gateway.Errorf(gateway.CodeUnavailable, "node.invoke %s: too many media transfers under way; try again later", inv.command)
		}
		return nil, fmt.Errorf("node.invoke %s: expect a media transfer: %w", inv.command, err)
	}
	b, _ := json.Marshal(transferParams{ID: t.ID, MaxSize: maxSize})
	m["transfer"] = b
	out, err := json.Marshal(m)
	if err != nil {
		tr.Abort()
		return nil, fmt.Errorf("node.invoke %s: params: %w", inv.command, err)
	}
	s.mu.Lock()
	inv.transfer, inv.tr = t.ID, tr
	s.transfers[t.ID] = inv
	s.mu.Unlock()
	return out, nil
}

// endMedia forgets inv's transfer; when it did not complete (abort), the
// transfer is aborted and the node is told node.media.cancel {transferId, code}.
func (s *Service) endMedia(inv *pendingInvoke, abort bool, code string) {
	if inv.tr == nil {
		return
	}
	s.mu.Lock()
	delete(s.transfers, inv.transfer)
	connID := inv.connID
	s.mu.Unlock()
	if !abort {
		return
	}
	inv.tr.Abort()
	// Best effort: a node gone or closing has nothing to cancel.
	_ = s.gw.Send(connID, EventMediaCancel, map[string]string{"transferId": inv.transfer, "code": code})
}

// mediaResult completes a media command's result: the node's result must
// name the transfer it was asked for; the invoke then waits (until
// deadline) for the file to be stored and returns its sidecar in Media.
// A failed transfer is a failed result (OK false, Error from the
// transport); a result without the transfer is INVALID_RESULT.
func (s *Service) mediaResult(ctx context.Context, inv *pendingInvoke, res InvokeResult, deadline time.Time) (InvokeResult, error) {
	if !res.OK {
		s.endMedia(inv, true, "CANCELLED")
		return res, nil
	}
	var named struct {
		ID string `json:"id"`
	}
	if len(res.Media) == 0 || json.Unmarshal(res.Media, &named) != nil || named.ID != inv.transfer {
		s.endMedia(inv, true, "CANCELLED")
		res.OK, res.Media, res.Payload = false, nil, nil
		res.Error = &NodeError{Code: "INVALID_RESULT", Message: fmt.Sprintf("node %s answered %s without its media transfer %s", inv.name, inv.command, inv.transfer)}
		return res, nil
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	m, err := inv.tr.Wait(wctx)
	var me *MediaError
	switch {
	case err == nil:
		s.endMedia(inv, false, "")
		b, merr := json.Marshal(m)
		if merr != nil {
			return InvokeResult{}, fmt.Errorf("node.invoke %s: media: %w", inv.command, merr)
		}
		res.Media = b
		return res, nil
	case errors.As(err, &me):
		s.endMedia(inv, true, me.Code)
		res.OK, res.Media = false, nil
		res.Error = &NodeError{Code: me.Code, Message: me.Error()}
		return res, nil
	case ctx.Err() != nil:
		s.endMedia(inv, true, "CANCELLED")
		return InvokeResult{}, fmt.Errorf("node.invoke %s on %s: %w", inv.command, inv.name, context.Cause(ctx))
	default:
		s.endMedia(inv, true, "TIMEOUT")
		return InvokeResult{}, gateway.Errorf(gateway.CodeTimeout, "node %s: the media of %s was not stored in time: %v", inv.name, inv.command, err)
	}
}

// MediaBegun records that transfer id began on a path other than
// node.media.offer — the HTTPS upload fallback, the wiring tells it when an
// upload takes the ticket — so that, as after an answered offer, the end of
// the node's connection from then on leaves the invoke waiting (until its
// deadline) for the file instead of failing it. An unknown id is ignored.
func (s *Service) MediaBegun(transferID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inv := s.transfers[transferID]; inv != nil {
		inv.offered = true
	}
}

// Offer serves node.media.offer {transferId, sdp} from connection connID:
// only the connection a media command's request went to, only for that
// invoke's transfer; once that connection ended mid-transfer (the invoke
// is detached, failConnLocked), any new connection of the same device
// from the same address may resume it (a reloaded phone page). Errors (*gateway.Error): INVALID_REQUEST (no id, a
// malformed or oversized SDP), FORBIDDEN (any other transfer: audited),
// UNAVAILABLE (no media receiver, or the answer failed).
func (s *Service) Offer(ctx context.Context, connID string, who Caller, nodeID, transferID, sdp string) (string, error) {
	switch {
	case transferID == "" || sdp == "":
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "node.media.offer: transferId and sdp are required")
	case len(sdp) > MaxOfferSDP:
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "node.media.offer: sdp is %d bytes, at most %d", len(sdp), MaxOfferSDP)
	}
	target := nodeID + " " + transferID
	refuse := func(reason string) (string, error) {
		s.auditAs(MethodMediaOffer, who, target, false, reason)
		return "", gateway.Errorf(gateway.CodeForbidden, "node.media.offer: %s", reason)
	}
	s.mu.Lock()
	inv := s.transfers[transferID]
	var owner, reason string
	if inv != nil {
		owner, reason = inv.connID, "was asked of another node connection"
		if inv.detached && owner != connID && inv.nodeID == nodeID {
			// A resume from a new connection of the same device (its page
			// was reloaded): from the address the transfer was asked at,
			// which ICE is bound to.
			if ps := s.peers[connID]; ps != nil && ps.p.RemoteIP == inv.peerIP {
				inv.connID, owner = connID, connID
			} else {
				reason = "was asked of this device at another address"
			}
		}
	}
	s.mu.Unlock()
	switch {
	case inv == nil:
		return refuse(fmt.Sprintf("no transfer %q was asked for (unknown, finished or expired)", transferID))
	case owner != connID:
		return refuse(fmt.Sprintf("transfer %s %s", transferID, reason))
	case s.o.Media == nil:
		return "", gateway.Errorf(gateway.CodeUnavailable, "node.media.offer: this gateway takes no media transfers")
	}
	answer, err := s.o.Media.Answer(ctx, inv.nodeID, transferID, sdp)
	switch {
	case err == nil:
		s.mu.Lock()
		inv.offered = true
		s.mu.Unlock()
		return answer, nil
	case errors.Is(err, ErrMediaUnrequested):
		return refuse(fmt.Sprintf("transfer %s is no longer expected", transferID))
	case errors.Is(err, ErrMediaOffer):
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "node.media.offer: %v", err)
	}
	s.log.Warn("media offer not answered", "transfer", transferID, "err", err)
	return "", gateway.Errorf(gateway.CodeUnavailable, "node.media.offer: the gateway could not answer the offer")
}
