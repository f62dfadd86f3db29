package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// Limits of node.invoke params.
const (
	// MaxCommandLen caps a command name (bytes).
	MaxCommandLen = 128
	// MaxSelectorCaps caps selector.caps.
	MaxSelectorCaps = 32
)

// Node is one node in the registry (node.list, node.describe). NodeID is
// its deviceId, or "local:<connId>" for a node on the local operator
// token. A device may hold several node connections at once (two browser
// tabs, an old and a new `atrium node`): Connections lists the open ones,
// newest first, each with what it declared and may run (declared ∩
// approved); Commands and Caps are their union (sorted), and while the node
// is disconnected what its last connection had. The other fields describe
// its newest connection. LastSeen and ConnectedAt are Unix milliseconds:
// LastSeen is the last time the node connected, answered or disconnected;
// ConnectedAt when its newest connection opened. A disconnected node stays
// listed (Connected false, no Connections) for the presence TTL.
// InvokesInFlight is how many invokes sent to its connections wait for an
// answer now (a caller choosing among several nodes picks the freest).
type Node struct {
	NodeID      string   `json:"nodeId"`
	DisplayName string   `json:"displayName"`
	Platform    string   `json:"platform"`
	Version     string   `json:"version"`
	Mode        string   `json:"mode"`
	DeviceID    string   `json:"deviceId,omitempty"`
	InstanceID  string   `json:"instanceId,omitempty"`
	IP          string   `json:"ip"`
	Caps        []string `json:"caps"`
	Commands    []string `json:"commands"`
	Connected   bool     `json:"connected"`
	LastSeen    int64    `json:"lastSeen"`
	ConnectedAt int64    `json:"connectedAt"`
	// Connections are the node's open connections, newest first.
	Connections     []NodeConnection `json:"connections"`
	InvokesInFlight int              `json:"invokesInFlight"`
}

// NodeConnection is one open connection of a node: the client it says it
// is and the caps and commands it may use (declared ∩ approved, sorted);
// ConnectedAt in Unix milliseconds.
type NodeConnection struct {
	InstanceID  string   `json:"instanceId,omitempty"`
	Platform    string   `json:"platform"`
	Version     string   `json:"version"`
	IP          string   `json:"ip"`
	Caps        []string `json:"caps"`
	Commands    []string `json:"commands"`
	ConnectedAt int64    `json:"connectedAt"`
}

type nodeState struct {
	node  Node
	conns []peer    // open node connections that take invokes, oldest first
	gone  time.Time // when the last connection ended
}

func (s *Service) nodeConnectedLocked(p peer) {
	id := p.nodeID()
	ns := s.nodes[id]
	if ns == nil {
		ns = &nodeState{}
		s.nodes[id] = ns
	}
	ns.conns = append(ns.conns, p)
	ns.refresh(s.o.Now().UnixMilli())
	s.capNodesLocked()
}

// refresh rebuilds ns.node from its open connections (there is one at
// least): the newest describes the node, the caps and commands are the
// union of all of theirs.
func (ns *nodeState) refresh(lastSeen int64) {
	p := ns.conns[len(ns.conns)-1]
	n := Node{
		NodeID: p.nodeID(), DisplayName: p.name(), Platform: p.Client.Platform, Version: p.Client.Version,
		Mode: p.Client.Mode, DeviceID: p.Principal.Device, InstanceID: p.Client.InstanceID, IP: p.RemoteIP,
		Connected: true, LastSeen: lastSeen, ConnectedAt: p.ConnectedAt.UnixMilli(),
	}
	var caps, cmds []string
	for i := len(ns.conns) - 1; i >= 0; i-- {
		c := ns.conns[i]
		caps, cmds = append(caps, c.Caps...), append(cmds, c.Commands...)
		n.Connections = append(n.Connections, NodeConnection{InstanceID: c.Client.InstanceID, Platform: c.Client.Platform,
			Version: c.Client.Version, IP: c.RemoteIP, Caps: slices.Clone(c.Caps), Commands: slices.Clone(c.Commands),
			ConnectedAt: c.ConnectedAt.UnixMilli()})
	}
	n.Caps, n.Commands = sortedSet(caps), sortedSet(cmds)
	ns.node = n
}

// nodeConnGoneLocked takes connection connID off node id's open
// connections; false when it was not among them.
func (s *Service) nodeConnGoneLocked(id, connID string) bool {
	ns := s.nodes[id]
	if ns == nil {
		return false
	}
	n := len(ns.conns)
	ns.conns = slices.DeleteFunc(ns.conns, func(c peer) bool { return c.ConnID == connID })
	if len(ns.conns) == n {
		return false
	}
	now := s.o.Now()
	if len(ns.conns) > 0 {
		ns.refresh(now.UnixMilli())
		return true
	}
	ns.node.Connected, ns.node.LastSeen, ns.node.Connections, ns.gone = false, now.UnixMilli(), []NodeConnection{}, now
	return true
}

// capNodesLocked keeps at most PresenceMax disconnected nodes (the ones
// gone longest ago go first).
func (s *Service) capNodesLocked() {
	var gone []string
	for id, ns := range s.nodes {
		if len(ns.conns) == 0 {
			gone = append(gone, id)
		}
	}
	if len(gone) <= s.o.PresenceMax {
		return
	}
	sort.Slice(gone, func(i, j int) bool { return s.nodes[gone[i]].gone.Before(s.nodes[gone[j]].gone) })
	for _, id := range gone[:len(gone)-s.o.PresenceMax] {
		delete(s.nodes, id)
	}
}

// Nodes lists the registry: connected nodes first, then by display name
// and id.
func (s *Service) Nodes() []Node {
	s.mu.Lock()
	out := make([]Node, 0, len(s.nodes))
	for _, ns := range s.nodes {
		out = append(out, s.snapshotLocked(ns))
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Connected != b.Connected {
			return a.Connected
		}
		if a.DisplayName != b.DisplayName {
			return a.DisplayName < b.DisplayName
		}
		return a.NodeID < b.NodeID
	})
	return out
}

// AnyConnected reports whether any node is connected.
func (s *Service) AnyConnected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range s.nodes {
		if len(ns.conns) > 0 {
			return true
		}
	}
	return false
}

// Describe returns node id; NOT_FOUND (a *gateway.Error) when unknown.
func (s *Service) Describe(id string) (Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.nodes[id]
	if ns == nil {
		return Node{}, gateway.Errorf(gateway.CodeNotFound, "no node %q", id)
	}
	return s.snapshotLocked(ns), nil
}

// snapshotLocked is a copy of ns.node with its invokes in flight.
func (s *Service) snapshotLocked(ns *nodeState) Node {
	n := cloneNode(ns.node)
	for _, c := range ns.conns {
		n.InvokesInFlight += s.pendingByConn[c.ConnID]
	}
	return n
}

func cloneNode(n Node) Node {
	n.Caps, n.Commands = slices.Clone(n.Caps), slices.Clone(n.Commands)
	n.Connections = slices.Clone(n.Connections)
	for i := range n.Connections {
		c := &n.Connections[i]
		c.Caps, c.Commands = slices.Clone(c.Caps), slices.Clone(c.Commands)
	}
	if n.Connections == nil {
		n.Connections = []NodeConnection{}
	}
	return n
}

// Reasons in the details ({"reason": …}) of node.invoke's retryable
// UNAVAILABLE errors after which the command certainly did not run, so a
// caller may send it to another node at once (the CLI's --node with
// several candidates does).
const (
	// ReasonBusy: every connection of the node that may run the command
	// has MaxPendingInvokes invokes waiting, or the node answered busy.
	ReasonBusy = "node_busy"
	// ReasonNotConnected: the node has no open connection, or the one
	// chosen was closing before the request could be sent.
	ReasonNotConnected = "node_not_connected"
)

// unavailable is a retryable UNAVAILABLE with details {"reason": reason}.
func unavailable(reason, format string, args ...any) *gateway.Error {
	e := gateway.Errorf(gateway.CodeUnavailable, format, args...)
	e.Details = map[string]any{"reason": reason}
	return e
}

// Selector picks a node by what it offers: a connected node whose caps
// include every one of Caps (and that may run the command).
type Selector struct {
	Caps []string `json:"caps"`
}

// InvokeRequest is node.invoke's params (SPEC §7): NodeID or Selector
// (exactly one), Command, Params (a JSON object, {} when absent) and
// TimeoutMs (default 30 000, at most 600 000).
type InvokeRequest struct {
	NodeID    string          `json:"nodeId,omitempty"`
	Selector  *Selector       `json:"selector,omitempty"`
	Command   string          `json:"command"`
	Params    json.RawMessage `json:"params,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
}

// NodeError is a failure the node reported: {code, message}. Retryable
// with code UNAVAILABLE means the node could not take the request now
// (busy); node.invoke then fails with UNAVAILABLE itself.
type NodeError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}

// Refused reports whether the node refused the command (code FORBIDDEN:
// its person said no, or turned the feature off, as a phone's location
// is until its person turns it on).
func (e *NodeError) Refused() bool { return e != nil && e.Code == gateway.CodeForbidden }

// InvokeResult is node.invoke's answer: which node ran Command, whether it
// succeeded (OK with Payload, else Error), and Media when the result is a
// transfer outside the frame (reserved for camera/screen commands: {id, …}).
type InvokeResult struct {
	NodeID  string          `json:"nodeId"`
	Command string          `json:"command"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *NodeError      `json:"error,omitempty"`
	Media   json.RawMessage `json:"media,omitempty"`
}

// InvokeRequestEvent is the payload of "node.invoke.request" sent to the
// node: it answers with node.invoke.result {id, …} within TimeoutMs.
type InvokeRequestEvent struct {
	ID        string          `json:"id"`
	Command   string          `json:"command"`
	Params    json.RawMessage `json:"params"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// ResultParams are node.invoke.result's params: the request's ID, OK with
// Payload, or Error; Media is reserved for results carried outside the
// frame.
type ResultParams struct {
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *NodeError      `json:"error,omitempty"`
	Media   json.RawMessage `json:"media,omitempty"`
}

// Caller is who invokes, for the audit log: Role as the audit log names it
// ([AuditRole] of a gateway principal, or "agent:<role>"), IP when known.
type Caller struct {
	Role string
	IP   string
}

type pendingInvoke struct {
	id, connID, nodeID, name, command string
	peerIP                            string             // the node connection's remote address
	done                              chan invokeOutcome // buffered 1; written once

	// A media command's transfer (expectMedia), else "" and nil.
	transfer string
	tr       MediaTransfer
	// offered: the node's offer for the transfer was answered (under s.mu).
	offered bool
	// detached: the connection ended while the transfer was under way; the
	// invoke now waits for the transfer alone, which the same device may
	// resume from a new connection (under s.mu; connID is then the
	// connection that resumed it last).
	detached bool
}

type invokeOutcome struct {
	res ResultParams
	err *gateway.Error
	// detached: the node's connection ended after its transfer began
	// (Service.detachLocked); the invoke waits for the transfer.
	detached bool
}

func (p *pendingInvoke) finish(o invokeOutcome) {
	select {
	case p.done <- o:
	default:
	}
}

// Invoke runs one command on a node and waits for its answer. It goes to
// the newest of the node's connections that may run the command and has
// fewer than MaxPendingInvokes invokes waiting. Errors are
// *gateway.Error: INVALID_REQUEST (bad params), NOT_FOUND (no such node, or
// no connected node with the selector's caps), UNAVAILABLE, retryable (the
// node is not connected, its connections that may run the command have
// MaxPendingInvokes invokes waiting each, it disconnected or its
// connection started closing before answering, or it answered busy: a
// retryable UNAVAILABLE), FORBIDDEN (the node may
// not run the command; audited), TIMEOUT (no answer in time),
// PAYLOAD_TOO_LARGE (the node's result is over MaxResultBytes); ctx ending
// returns ctx's error. A result in which the node reports a failure is not
// an error: OK is false and Error says why. Every decision is audited.
func (s *Service) Invoke(ctx context.Context, who Caller, req InvokeRequest) (InvokeResult, error) {
	timeout, params, gerr := checkInvoke(&req)
	if gerr != nil {
		return InvokeResult{}, gerr
	}
	inv, gerr := s.target(req)
	target := inv.nodeID + " " + req.Command
	var err error
	if gerr != nil {
		if gerr.Code == gateway.CodeForbidden {
			s.auditAs("node.invoke", who, target, false, gerr.Message)
		}
		return InvokeResult{}, gerr
	}
	// The node is told timeoutMs; its answer may take a moment to arrive.
	deadline := time.Now().Add(timeout + min(timeout/10, 2*time.Second))
	if IsMediaCommand(req.Command) && s.o.Media != nil {
		// The transfer is expected before the node hears of it: a node
		// pushing a transfer nobody asked for is refused.
		if params, err = s.expectMedia(inv, params, deadline); err != nil {
			s.dropInvoke(inv.id)
			return InvokeResult{}, err
		}
	}
	s.auditAs("node.invoke", who, target, true, "command allowed on the node")
	err = s.gw.Send(inv.connID, EventInvokeRequest, InvokeRequestEvent{
		ID: inv.id, Command: req.Command, Params: params, TimeoutMs: timeout.Milliseconds()})
	if err != nil {
		// The connection is closing (e.g. its send buffer is full, a slow
		// consumer) or gone: nothing more it was sent can be answered.
		// Its waiting invokes fail now rather than at their timeouts.
		s.endMedia(inv, true, "CANCELLED")
		s.connClosing(inv.connID, inv.nodeID)
		return InvokeResult{}, unavailable(ReasonNotConnected, "node %s disconnected (its connection is closing)", inv.name)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var out invokeOutcome
	select {
	case out = <-inv.done:
	case <-t.C:
		if !s.dropInvoke(inv.id) {
			out = <-inv.done // answered just now
			break
		}
		s.endMedia(inv, true, "TIMEOUT")
		return InvokeResult{}, gateway.Errorf(gateway.CodeTimeout, "node %s did not answer %s within %d ms", inv.name, req.Command, timeout.Milliseconds())
	case <-ctx.Done():
		if !s.dropInvoke(inv.id) {
			out = <-inv.done
			break
		}
		s.endMedia(inv, true, "CANCELLED")
		return InvokeResult{}, fmt.Errorf("node.invoke %s on %s: %w", req.Command, inv.name, context.Cause(ctx))
	}
	if out.detached {
		// The node's connection ended mid-transfer: the file may still
		// come, resumed by the same device on a new connection.
		res := InvokeResult{NodeID: inv.nodeID, Command: req.Command, OK: true, Payload: json.RawMessage(`{"resumed":true}`),
			Media: json.RawMessage(fmt.Sprintf(`{"id":%q}`, inv.transfer))}
		return s.mediaResult(ctx, inv, res, deadline)
	}
	if out.err != nil {
		s.endMedia(inv, true, "CANCELLED")
		return InvokeResult{}, out.err
	}
	if e := out.res.Error; !out.res.OK && e != nil && e.Code == gateway.CodeUnavailable && e.Retryable {
		// The node could not take it now: a retryable protocol error (not
		// a result the idempotency cache would keep).
		s.endMedia(inv, true, "CANCELLED")
		return InvokeResult{}, unavailable(ReasonBusy, "node %s: %s", inv.name, e.Message)
	}
	res := InvokeResult{NodeID: inv.nodeID, Command: req.Command, OK: out.res.OK, Payload: out.res.Payload,
		Error: out.res.Error, Media: out.res.Media}
	if inv.tr != nil {
		return s.mediaResult(ctx, inv, res, deadline)
	}
	return res, nil
}

func checkInvoke(req *InvokeRequest) (time.Duration, json.RawMessage, *gateway.Error) {
	req.Command = strings.TrimSpace(req.Command)
	switch {
	case req.Command == "":
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: command is required (e.g. \"system.run\")")
	case len(req.Command) > MaxCommandLen || !utf8.ValidString(req.Command):
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: command is longer than %d bytes", MaxCommandLen)
	case req.NodeID != "" && req.Selector != nil:
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: give nodeId or selector, not both")
	case req.NodeID == "" && req.Selector == nil:
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: nodeId or selector {caps} is required")
	case req.Selector != nil && len(sortedSet(req.Selector.Caps)) == 0:
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: selector.caps must name at least one capability")
	case req.Selector != nil && len(req.Selector.Caps) > MaxSelectorCaps:
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: selector.caps has more than %d entries", MaxSelectorCaps)
	case req.TimeoutMs < 0 || req.TimeoutMs > MaxInvokeTimeout.Milliseconds():
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: timeoutMs must be between 1 and %d (got %d)", MaxInvokeTimeout.Milliseconds(), req.TimeoutMs)
	}
	timeout := DefaultInvokeTimeout
	if req.TimeoutMs > 0 {
		timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	}
	params := bytes.TrimSpace(req.Params)
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	if params[0] != '{' {
		return 0, nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke: params must be a JSON object")
	}
	return timeout, params, nil
}

// target resolves the node and its connection and registers the pending
// invoke under one lock, so that a disconnection after it fails the
// invoke.
func (s *Service) target(req InvokeRequest) (*pendingInvoke, *gateway.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns *nodeState
	var conns []peer // connections that may run the command, best first
	if req.NodeID != "" {
		ns = s.nodes[req.NodeID]
		switch {
		case ns == nil:
			return &pendingInvoke{nodeID: req.NodeID}, gateway.Errorf(gateway.CodeNotFound, "no node %q", req.NodeID)
		case len(ns.conns) == 0:
			return &pendingInvoke{nodeID: req.NodeID}, unavailable(ReasonNotConnected, "node %s is not connected", ns.node.DisplayName)
		}
		for i := len(ns.conns) - 1; i >= 0; i-- {
			if slices.Contains(ns.conns[i].Commands, req.Command) {
				conns = append(conns, ns.conns[i])
			}
		}
		if len(conns) == 0 {
			return &pendingInvoke{nodeID: req.NodeID}, gateway.Errorf(gateway.CodeForbidden,
				"node %s may not run %s (allowed: %s)", ns.node.DisplayName, req.Command, listOrNone(ns.node.Commands))
		}
	} else {
		caps := sortedSet(req.Selector.Caps)
		offered := false
		for _, n := range s.nodes {
			for _, c := range n.conns {
				if hasAll(c.Caps, caps) {
					offered = true
					if slices.Contains(c.Commands, req.Command) {
						conns = append(conns, c)
					}
				}
			}
		}
		sel := "caps:" + strings.Join(caps, ",")
		switch {
		case !offered:
			return &pendingInvoke{nodeID: sel}, gateway.Errorf(gateway.CodeNotFound, "no connected node has caps %s", strings.Join(caps, ", "))
		case len(conns) == 0:
			return &pendingInvoke{nodeID: sel}, gateway.Errorf(gateway.CodeForbidden,
				"no connected node with caps %s may run %s", strings.Join(caps, ", "), req.Command)
		}
		// The connection opened most recently (ties: the smallest node id).
		sort.SliceStable(conns, func(i, j int) bool {
			a, b := conns[i], conns[j]
			if !a.ConnectedAt.Equal(b.ConnectedAt) {
				return a.ConnectedAt.After(b.ConnectedAt)
			}
			return a.nodeID() < b.nodeID()
		})
	}
	i := slices.IndexFunc(conns, func(c peer) bool { return s.pendingByConn[c.ConnID] < s.o.MaxPendingInvokes })
	if i < 0 {
		c := conns[0]
		return &pendingInvoke{nodeID: c.nodeID()}, unavailable(ReasonBusy,
			"node %s is busy: %d invokes wait for it already; try again later", s.nodes[c.nodeID()].node.DisplayName, s.o.MaxPendingInvokes)
	}
	c := conns[i]
	ns = s.nodes[c.nodeID()]
	inv := &pendingInvoke{id: uuid.NewString(), connID: c.ConnID, nodeID: ns.node.NodeID, peerIP: c.RemoteIP,
		name: ns.node.DisplayName, command: req.Command, done: make(chan invokeOutcome, 1)}
	s.invokes[inv.id] = inv
	s.pendingByConn[c.ConnID]++
	return inv, nil
}

// takeInvokeLocked removes pending invoke id and returns it; nil when it
// was already finished (its outcome is then in its channel).
func (s *Service) takeInvokeLocked(id string) *pendingInvoke {
	inv := s.invokes[id]
	if inv == nil {
		return nil
	}
	delete(s.invokes, id)
	if s.pendingByConn[inv.connID]--; s.pendingByConn[inv.connID] <= 0 {
		delete(s.pendingByConn, inv.connID)
	}
	return inv
}

// dropInvoke removes a pending invoke; false when it was already finished
// (its outcome is then in its channel).
func (s *Service) dropInvoke(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeInvokeLocked(id) != nil
}

// connClosing takes node connection connID out of service when the
// gateway can no longer send to it (it is closing, or gone): it stops
// taking invokes and the invokes waiting for it fail at once with
// UNAVAILABLE; Disconnected finishes the rest when the connection has
// ended.
func (s *Service) connClosing(connID, nodeID string) {
	s.mu.Lock()
	s.nodeConnGoneLocked(nodeID, connID)
	gone := s.failConnLocked(connID)
	s.mu.Unlock()
	for _, inv := range gone {
		if inv.detached {
			inv.finish(invokeOutcome{detached: true})
			continue
		}
		inv.finish(invokeOutcome{err: gateway.Errorf(gateway.CodeUnavailable, "node %s disconnected (its connection is closing)", inv.name)})
	}
	s.changed()
}

// failConnLocked removes and returns the pending invokes sent to connID.
// A media command whose transfer had begun (its offer was answered) on a
// paired device's connection is marked detached instead of failed: its
// file may still come, the same device resuming the transfer from a new
// connection (a reloaded page; Offer), and its invoke waits for that
// until its deadline. A local node's id names its connection, so its
// transfers cannot be resumed and fail as the others.
func (s *Service) failConnLocked(connID string) []*pendingInvoke {
	var gone []*pendingInvoke
	for id, inv := range s.invokes {
		if inv.connID == connID {
			gone = append(gone, s.takeInvokeLocked(id))
			if inv.tr != nil && inv.offered && !strings.HasPrefix(inv.nodeID, "local:") {
				inv.detached = true
			}
		}
	}
	return gone
}

// Result delivers node.invoke.result from connection connID. Errors
// (*gateway.Error): INVALID_REQUEST (no id), NOT_FOUND (no pending invoke
// with that id: it timed out, was cancelled or answered), FORBIDDEN (the
// invoke was sent to another connection; audited, and the invoke keeps
// waiting for its own node), PAYLOAD_TOO_LARGE (over MaxResultBytes; the
// invoke fails with it too).
func (s *Service) Result(connID string, who Caller, r ResultParams) error {
	if r.ID == "" {
		return gateway.Errorf(gateway.CodeInvalidRequest, "node.invoke.result: id is required")
	}
	s.mu.Lock()
	inv := s.invokes[r.ID]
	switch {
	case inv == nil:
		s.mu.Unlock()
		return gateway.Errorf(gateway.CodeNotFound, "node.invoke.result: no pending invoke %q (it timed out, was cancelled or was answered)", r.ID)
	case inv.connID != connID:
		s.mu.Unlock()
		reason := fmt.Sprintf("invoke %s was sent to another node", r.ID)
		s.auditAs("node.invoke.result", who, r.ID, false, reason)
		return gateway.Errorf(gateway.CodeForbidden, "node.invoke.result: %s", reason)
	}
	s.takeInvokeLocked(r.ID)
	if ns := s.nodes[inv.nodeID]; ns != nil {
		ns.node.LastSeen = s.o.Now().UnixMilli()
	}
	s.mu.Unlock()
	if n := len(r.Payload) + len(r.Media); n > s.o.MaxResultBytes {
		e := gateway.Errorf(gateway.CodePayloadTooLarge, "the result of %s from node %s is %d bytes, over the %d-byte inline limit",
			inv.command, inv.name, n, s.o.MaxResultBytes)
		inv.finish(invokeOutcome{err: e})
		return e
	}
	if !r.OK && r.Error == nil {
		r.Error = &NodeError{Code: "UNKNOWN", Message: "the node reported a failure without details"}
	}
	if r.OK {
		r.Error = nil
	}
	inv.finish(invokeOutcome{res: r})
	return nil
}

func (s *Service) auditAs(op string, who Caller, target string, allowed bool, reason string) {
	s.auditRecord(op, who.Role, who.IP, target, allowed, reason)
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// Refused reports whether err is a refusal (FORBIDDEN): the node may not
// run the command, or the caller may not ask.
func Refused(err error) bool {
	var ge *gateway.Error
	return errors.As(err, &ge) && ge.Code == gateway.CodeForbidden
}
