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
// token. Commands are the commands it may run (declared ∩ approved),
// Caps its declared capabilities, both sorted. LastSeen and ConnectedAt
// are Unix milliseconds: LastSeen is the last time the node connected,
// answered or disconnected; ConnectedAt when its newest connection opened.
// A disconnected node stays listed (Connected false) for the presence TTL.
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
}

type nodeState struct {
	node  Node
	conns []string  // open node connections, oldest first; invokes go to the newest
	gone  time.Time // when the last connection ended
}

func (s *Service) nodeConnectedLocked(p peer) {
	id := p.nodeID()
	ns := s.nodes[id]
	if ns == nil {
		ns = &nodeState{}
		s.nodes[id] = ns
	}
	now := s.o.Now().UnixMilli()
	ns.conns = append(ns.conns, p.ConnID)
	ns.node = nodeOf(p, now)
	s.capNodesLocked()
}

func nodeOf(p peer, lastSeen int64) Node {
	return Node{
		NodeID: p.nodeID(), DisplayName: p.name(), Platform: p.Client.Platform, Version: p.Client.Version,
		Mode: p.Client.Mode, DeviceID: p.Principal.Device, InstanceID: p.Client.InstanceID, IP: p.RemoteIP,
		Caps: slices.Clone(p.Caps), Commands: slices.Clone(p.Commands), Connected: true,
		LastSeen: lastSeen, ConnectedAt: p.ConnectedAt.UnixMilli(),
	}
}

func (s *Service) nodeDisconnectedLocked(p peer) {
	ns := s.nodes[p.nodeID()]
	if ns == nil {
		return
	}
	ns.conns = slices.DeleteFunc(ns.conns, func(c string) bool { return c == p.ConnID })
	now := s.o.Now()
	if len(ns.conns) > 0 {
		if ps := s.peers[ns.conns[len(ns.conns)-1]]; ps != nil {
			ns.node = nodeOf(ps.p, now.UnixMilli())
		}
		return
	}
	ns.node.Connected, ns.node.LastSeen, ns.gone = false, now.UnixMilli(), now
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
		out = append(out, cloneNode(ns.node))
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
	return cloneNode(ns.node), nil
}

func cloneNode(n Node) Node {
	n.Caps, n.Commands = slices.Clone(n.Caps), slices.Clone(n.Commands)
	return n
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

// NodeError is a failure the node reported: {code, message}.
type NodeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

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
	done                              chan invokeOutcome // buffered 1; written once
}

type invokeOutcome struct {
	res ResultParams
	err *gateway.Error
}

func (p *pendingInvoke) finish(o invokeOutcome) {
	select {
	case p.done <- o:
	default:
	}
}

// Invoke runs one command on a node and waits for its answer. Errors are
// *gateway.Error: INVALID_REQUEST (bad params), NOT_FOUND (no such node, or
// no connected node with the selector's caps), UNAVAILABLE (the node is
// not connected, or disconnected before answering), FORBIDDEN (the node may
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
	if gerr != nil {
		if gerr.Code == gateway.CodeForbidden {
			s.auditAs("node.invoke", who, target, false, gerr.Message)
		}
		return InvokeResult{}, gerr
	}
	s.auditAs("node.invoke", who, target, true, "command allowed on the node")
	err := s.gw.Send(inv.connID, EventInvokeRequest, InvokeRequestEvent{
		ID: inv.id, Command: req.Command, Params: params, TimeoutMs: timeout.Milliseconds()})
	if err != nil {
		s.dropInvoke(inv.id)
		return InvokeResult{}, gateway.Errorf(gateway.CodeUnavailable, "node %s disconnected", inv.name)
	}
	// The node is told timeoutMs; its answer may take a moment to arrive.
	t := time.NewTimer(timeout + min(timeout/10, 2*time.Second))
	defer t.Stop()
	var out invokeOutcome
	select {
	case out = <-inv.done:
	case <-t.C:
		if !s.dropInvoke(inv.id) {
			out = <-inv.done // answered just now
			break
		}
		return InvokeResult{}, gateway.Errorf(gateway.CodeTimeout, "node %s did not answer %s within %d ms", inv.name, req.Command, timeout.Milliseconds())
	case <-ctx.Done():
		if !s.dropInvoke(inv.id) {
			out = <-inv.done
			break
		}
		return InvokeResult{}, fmt.Errorf("node.invoke %s on %s: %w", req.Command, inv.name, context.Cause(ctx))
	}
	if out.err != nil {
		return InvokeResult{}, out.err
	}
	return InvokeResult{NodeID: inv.nodeID, Command: req.Command, OK: out.res.OK, Payload: out.res.Payload,
		Error: out.res.Error, Media: out.res.Media}, nil
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

// target resolves the node and registers the pending invoke under one
// lock, so that a disconnection after it fails the invoke.
func (s *Service) target(req InvokeRequest) (*pendingInvoke, *gateway.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns *nodeState
	if req.NodeID != "" {
		ns = s.nodes[req.NodeID]
		switch {
		case ns == nil:
			return &pendingInvoke{nodeID: req.NodeID}, gateway.Errorf(gateway.CodeNotFound, "no node %q", req.NodeID)
		case len(ns.conns) == 0:
			return &pendingInvoke{nodeID: req.NodeID}, gateway.Errorf(gateway.CodeUnavailable, "node %s is not connected", ns.node.DisplayName)
		case !slices.Contains(ns.node.Commands, req.Command):
			return &pendingInvoke{nodeID: req.NodeID}, gateway.Errorf(gateway.CodeForbidden,
				"node %s may not run %s (allowed: %s)", ns.node.DisplayName, req.Command, listOrNone(ns.node.Commands))
		}
	} else {
		caps := sortedSet(req.Selector.Caps)
		var offered, allowed []*nodeState
		for _, c := range s.nodes {
			if len(c.conns) > 0 && hasAll(c.node.Caps, caps) {
				offered = append(offered, c)
				if slices.Contains(c.node.Commands, req.Command) {
					allowed = append(allowed, c)
				}
			}
		}
		sel := "caps:" + strings.Join(caps, ",")
		switch {
		case len(offered) == 0:
			return &pendingInvoke{nodeID: sel}, gateway.Errorf(gateway.CodeNotFound, "no connected node has caps %s", strings.Join(caps, ", "))
		case len(allowed) == 0:
			return &pendingInvoke{nodeID: sel}, gateway.Errorf(gateway.CodeForbidden,
				"no connected node with caps %s may run %s", strings.Join(caps, ", "), req.Command)
		}
		// The node connected most recently (ties: the smallest id).
		sort.Slice(allowed, func(i, j int) bool {
			a, b := allowed[i].node, allowed[j].node
			if a.ConnectedAt != b.ConnectedAt {
				return a.ConnectedAt > b.ConnectedAt
			}
			return a.NodeID < b.NodeID
		})
		ns = allowed[0]
	}
	inv := &pendingInvoke{id: uuid.NewString(), connID: ns.conns[len(ns.conns)-1], nodeID: ns.node.NodeID,
		name: ns.node.DisplayName, command: req.Command, done: make(chan invokeOutcome, 1)}
	s.invokes[inv.id] = inv
	return inv, nil
}

// dropInvoke removes a pending invoke; false when it was already finished
// (its outcome is then in its channel).
func (s *Service) dropInvoke(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.invokes[id]; !ok {
		return false
	}
	delete(s.invokes, id)
	return true
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
	delete(s.invokes, r.ID)
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
