package devices

import (
	"context"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// How a pending request ends (device.pair.resolved's decision; "removed"
// is never sent: device.remove closes the connections with ReasonRemoved).
const (
	decisionApproved = "approved"
	decisionRejected = "rejected"
	decisionExpired  = "expired"
	decisionRemoved  = "removed"
)

// resolvedMemory is how long the end of a request is remembered for a
// connection of its device that was admitted as pending just before it and
// registers just after (longer than the gateway's handshake timeout, 10 s
// by default, within which such a connection is confirmed).
const resolvedMemory = time.Minute

// resolution is how a pending request ended.
type resolution struct {
	deviceID string
	decision string            // decisionApproved, ...
	tokens   map[string]string // approved: delivered with the event
	told     map[string]bool   // connIDs that got device.pair.resolved
	at       time.Time
}

// closeReasons are the 4001 reasons of the decisions that end a pending
// connection.
var closeReasons = map[string]string{decisionRejected: ReasonRejected, decisionExpired: ReasonExpired, decisionRemoved: ReasonRemoved}

// resolve ends the request requestID of device deviceID (already taken out
// of the pairing store by the caller): the device's pending connections get
// device.pair.resolved (with the tokens when approved; none when removed),
// then those of a decision that ends them are closed (4001). A connection
// admitted as pending before this and registered after it learns the same
// in its Confirm (pendingConfirm), exactly once: s.resMu orders the two.
func (s *Service) resolve(requestID, deviceID, decision string, tokens map[string]string) {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	s.resolveLocked(requestID, deviceID, decision, tokens)
}

// resolveLocked is resolve with s.resMu held.
func (s *Service) resolveLocked(requestID, deviceID, decision string, tokens map[string]string) {
	s.untrack(requestID)
	now := s.o.Now()
	for id, r := range s.resolved {
		if now.Sub(r.at) > resolvedMemory {
			delete(s.resolved, id)
		}
	}
	r := &resolution{deviceID: deviceID, decision: decision, tokens: tokens, told: map[string]bool{}, at: now}
	s.resolved[requestID] = r
	if decision != decisionRemoved {
		ev := resolvedEvent(requestID, r)
		for _, ci := range s.o.Gateway.Conns(deviceConns(deviceID, gateway.RoleUnpaired)) {
			if s.o.Gateway.Send(ci.ConnID, EventPairResolved, ev) == nil {
				r.told[ci.ConnID] = true
			}
		}
	}
	if reason, ok := closeReasons[decision]; ok {
		s.o.Gateway.CloseWhere(deviceConns(deviceID, gateway.RoleUnpaired), gateway.CloseUnauthorized, reason)
	}
}

func resolvedEvent(requestID string, r *resolution) map[string]any {
	ev := map[string]any{"requestId": requestID, "deviceId": r.deviceID, "decision": r.decision}
	if r.tokens != nil {
		ev["deviceTokens"] = r.tokens
	}
	return ev
}

// pendingConfirm is the Confirm of a connection admitted as pending for
// requestID: once it is registered, a request still pending keeps it; one
// that ended in between (the resolution found no connection to tell) is
// told now: approved → device.pair.resolved with the tokens, after its
// hello-ok; rejected, expired or removed → closed 4001 with the reason and
// no hello-ok; unknown (forgotten) → closed 4001.
func (s *Service) pendingConfirm(requestID, connID string) func(context.Context) *gateway.Error {
	return func(context.Context) *gateway.Error {
		s.resMu.Lock()
		defer s.resMu.Unlock()
		if s.tracked(requestID) {
			return nil
		}
		r := s.resolved[requestID]
		switch {
		case r == nil:
			return gateway.Errorf(gateway.CodeUnauthorized, "pairing request no longer pending; connect again")
		case r.told[connID]:
			return nil // told (and, unless approved, being closed) by resolve
		case r.decision == decisionApproved:
			if err := s.o.Gateway.Send(connID, EventPairResolved, resolvedEvent(requestID, r)); err != nil {
				return gateway.Errorf(gateway.CodeUnavailable, "pairing request approved; connect again with your key for the tokens")
			}
			r.told[connID] = true
			return nil
		}
		return gateway.Errorf(gateway.CodeUnauthorized, "%s", closeReasons[r.decision])
	}
}

// tracked reports whether requestID was submitted and is not resolved.
func (s *Service) tracked(requestID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live[requestID]
	return ok
}
