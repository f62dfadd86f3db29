package nodes

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// Exec ask decisions (exec.ask.answer, node.exec.ask's answer).
const (
	DecisionAllowOnce   = "allow-once"
	DecisionAllowAlways = "allow-always"
	DecisionDeny        = "deny"
)

// Limits of node.exec.ask.
const (
	MaxAskArgs      = 256
	MaxAskArgBytes  = 4096
	MaxAsksPerNode  = 8 // open asks of one connection at a time
	maxAskCwdBytes  = 4096
	askResolvedBy   = "person"
	askTimedOutBy   = "timeout"
	askCancelledBy  = "cancelled"
	askReasonDenied = "the person denied the command"
)

// ExecAsk is an open question to the person (event "exec.ask.requested",
// exec.ask.list): may node NodeID (DisplayName) run Command (argv) in Cwd?
// At and ExpiresAt are Unix milliseconds; no answer by ExpiresAt is "deny".
type ExecAsk struct {
	ID          string   `json:"id"`
	NodeID      string   `json:"nodeId"`
	DisplayName string   `json:"displayName"`
	Command     []string `json:"command"`
	Cwd         string   `json:"cwd"`
	At          int64    `json:"at"`
	ExpiresAt   int64    `json:"expiresAt"`
}

// ExecAskParams are node.exec.ask's params: Command (argv, required), Cwd,
// TimeoutMs (default 120 000, at most 600 000).
type ExecAskParams struct {
	Command   []string `json:"command"`
	Cwd       string   `json:"cwd"`
	TimeoutMs int64    `json:"timeoutMs,omitempty"`
}

// ExecAskResolved is the payload of "exec.ask.resolved": the ask is closed
// with Decision, By "person", "timeout" or "cancelled" (the node went or
// stopped waiting).
type ExecAskResolved struct {
	ID       string `json:"id"`
	Decision string `json:"decision"`
	By       string `json:"by"`
}

type pendingAsk struct {
	ask    ExecAsk
	connID string
	answer chan string // buffered 1
}

// Ask puts node connection connID's command to the person and waits for
// the decision (DecisionAllowOnce, DecisionAllowAlways or DecisionDeny).
// No answer within the timeout is DecisionDeny. Errors (*gateway.Error):
// INVALID_REQUEST (bad params), FORBIDDEN (connID is not a node
// connection), UNAVAILABLE (the connection already has MaxAsksPerNode
// open asks); ctx ending returns its error.
func (s *Service) Ask(ctx context.Context, connID string, p ExecAskParams) (string, error) {
	timeout, gerr := checkAsk(p)
	if gerr != nil {
		return "", gerr
	}
	now := s.o.Now()
	s.mu.Lock()
	ps := s.peers[connID]
	if ps == nil || !ps.p.isNode() {
		s.mu.Unlock()
		return "", gateway.Errorf(gateway.CodeForbidden, "node.exec.ask: only node connections may ask")
	}
	open := 0
	for _, a := range s.asks {
		if a.connID == connID {
			open++
		}
	}
	if open >= MaxAsksPerNode {
		s.mu.Unlock()
		return "", gateway.Errorf(gateway.CodeUnavailable, "node.exec.ask: %d asks of this node are already waiting for the person", open)
	}
	pa := &pendingAsk{connID: connID, answer: make(chan string, 1), ask: ExecAsk{
		ID: uuid.NewString(), NodeID: ps.p.nodeID(), DisplayName: ps.p.name(), Command: append([]string(nil), p.Command...),
		Cwd: p.Cwd, At: now.UnixMilli(), ExpiresAt: now.Add(timeout).UnixMilli()}}
	s.asks[pa.ask.ID] = pa
	s.mu.Unlock()

	s.log.Info("exec ask", "id", pa.ask.ID, "nodeId", pa.ask.NodeID)
	s.gw.BroadcastTo(gateway.Admin, EventExecAskRequested, pa.ask)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case d := <-pa.answer:
		return d, nil
	case <-t.C:
		if s.dropAsk(pa.ask.ID, askTimedOutBy) {
			return DecisionDeny, nil
		}
		return <-pa.answer, nil
	case <-ctx.Done():
		if s.dropAsk(pa.ask.ID, askCancelledBy) {
			return "", fmt.Errorf("node.exec.ask: %w", context.Cause(ctx))
		}
		return <-pa.answer, nil
	}
}

func checkAsk(p ExecAskParams) (time.Duration, *gateway.Error) {
	switch {
	case len(p.Command) == 0 || p.Command[0] == "":
		return 0, gateway.Errorf(gateway.CodeInvalidRequest, "node.exec.ask: command (argv, the program first) is required")
	case len(p.Command) > MaxAskArgs:
		return 0, gateway.Errorf(gateway.CodeInvalidRequest, "node.exec.ask: command has more than %d arguments", MaxAskArgs)
	case len(p.Cwd) > maxAskCwdBytes:
		return 0, gateway.Errorf(gateway.CodeInvalidRequest, "node.exec.ask: cwd is longer than %d bytes", maxAskCwdBytes)
	case p.TimeoutMs < 0 || p.TimeoutMs > MaxAskTimeout.Milliseconds():
		return 0, gateway.Errorf(gateway.CodeInvalidRequest, "node.exec.ask: timeoutMs must be between 1 and %d (got %d)", MaxAskTimeout.Milliseconds(), p.TimeoutMs)
	}
	for i, a := range p.Command {
		if len(a) > MaxAskArgBytes {
			return 0, gateway.Errorf(gateway.CodeInvalidRequest, "node.exec.ask: command[%d] is longer than %d bytes", i, MaxAskArgBytes)
		}
	}
	if p.TimeoutMs == 0 {
		return DefaultAskTimeout, nil
	}
	return time.Duration(p.TimeoutMs) * time.Millisecond, nil
}

// dropAsk closes an open ask without an answer and tells the admins;
// false when it was answered already (the answer is in its channel).
func (s *Service) dropAsk(id, by string) bool {
	s.mu.Lock()
	if _, ok := s.asks[id]; !ok {
		s.mu.Unlock()
		return false
	}
	delete(s.asks, id)
	s.mu.Unlock()
	s.gw.BroadcastTo(gateway.Admin, EventExecAskResolved, ExecAskResolved{ID: id, Decision: DecisionDeny, By: by})
	return true
}

// Answer gives the person's decision on ask id. Errors (*gateway.Error):
// INVALID_REQUEST (not one of the three decisions), NOT_FOUND (no open ask
// id: answered, expired or withdrawn). The decision is audited.
func (s *Service) Answer(who Caller, id, decision string) error {
	switch decision {
	case DecisionAllowOnce, DecisionAllowAlways, DecisionDeny:
	default:
		return gateway.Errorf(gateway.CodeInvalidRequest, "exec.ask.answer: decision must be %q, %q or %q (got %q)",
			DecisionAllowOnce, DecisionAllowAlways, DecisionDeny, decision)
	}
	s.mu.Lock()
	pa := s.asks[id]
	if pa == nil {
		s.mu.Unlock()
		return gateway.Errorf(gateway.CodeNotFound, "exec.ask.answer: no open ask %q (answered, expired or withdrawn)", id)
	}
	delete(s.asks, id)
	s.mu.Unlock()
	reason := "the person allowed the command (" + decision + ")"
	if decision == DecisionDeny {
		reason = askReasonDenied
	}
	// Audited before the node hears it: a node runs an allowed command
	// the moment its exec.ask returns.
	s.auditAs("exec.ask.answer", who, pa.ask.NodeID+": "+strings.Join(pa.ask.Command, " "), decision != DecisionDeny, reason)
	pa.answer <- decision
	s.gw.BroadcastTo(gateway.Admin, EventExecAskResolved, ExecAskResolved{ID: id, Decision: decision, By: askResolvedBy})
	return nil
}

// Asks lists the open asks, oldest first.
func (s *Service) Asks() []ExecAsk {
	s.mu.Lock()
	out := make([]ExecAsk, 0, len(s.asks))
	for _, a := range s.asks {
		out = append(out, a.ask)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].At != out[j].At {
			return out[i].At < out[j].At
		}
		return out[i].ID < out[j].ID
	})
	return out
}
