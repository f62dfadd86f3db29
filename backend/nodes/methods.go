package nodes

import (
	"context"
	"encoding/json"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// Methods served by [Service.Register] (docs/PROTOCOL.md "Nodes and
// presence"; who may call each is in "Who may call").
const (
	MethodNodeList       = "node.list"
	MethodNodeDescribe   = "node.describe"
	MethodNodeInvoke     = "node.invoke"
	MethodInvokeResult   = "node.invoke.result"
	MethodExecAsk        = "node.exec.ask"
	MethodExecAskAnswer  = "exec.ask.answer"
	MethodExecAskList    = "exec.ask.list"
	MethodPresenceUpdate = "presence.update"
)

// Events lists the events the service sends.
var Events = []string{EventPresence, EventInvokeRequest, EventExecAskRequested, EventExecAskResolved, EventMediaCancel}

// Register adds the node and presence methods to the gateway, each with
// the principals that may call it (docs/PROTOCOL.md "Who may call": the
// gateway refuses the others with FORBIDDEN and reports the refusal to its
// OnForbidden hook, which the app audits), and declares the events. Call
// it before the gateway serves.
func (s *Service) Register() {
	g := s.gw
	g.DeclareEvents(Events...)
	g.Handle(MethodNodeList, gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		return map[string]any{"nodes": s.Nodes()}, nil
	})
	g.Handle(MethodNodeDescribe, gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			NodeID string `json:"nodeId"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if p.NodeID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "node.describe: nodeId is required")
		}
		return s.Describe(p.NodeID)
	})
	g.Handle(MethodNodeInvoke, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p InvokeRequest
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if err := s.mayInvoke(ctx, c, p); err != nil {
			return nil, err
		}
		return s.Invoke(ctx, callerOf(c), p)
	})
	g.Handle(MethodInvokeResult, gateway.Write(gateway.Nodes), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p ResultParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return nil, s.Result(c.ConnID, callerOf(c), p)
	})
	g.Handle(MethodMediaOffer, gateway.Write(gateway.Nodes), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			TransferID string `json:"transferId"`
			SDP        string `json:"sdp"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		sdp, err := s.Offer(ctx, c.ConnID, callerOf(c), peer(gateway.ConnInfo{ConnID: c.ConnID, Principal: c.Principal}).nodeID(), p.TransferID, p.SDP)
		if err != nil {
			return nil, err
		}
		return map[string]string{"sdp": sdp}, nil
	})
	g.Handle(MethodExecAsk, gateway.Write(gateway.Nodes), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p ExecAskParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		d, err := s.Ask(ctx, c.ConnID, p)
		if err != nil {
			return nil, err
		}
		return map[string]string{"decision": d}, nil
	})
	g.Handle(MethodExecAskAnswer, gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID       string `json:"id"`
			Decision string `json:"decision"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if err := s.Answer(callerOf(c), p.ID, p.Decision); err != nil {
			return nil, err
		}
		return map[string]string{"id": p.ID, "decision": p.Decision}, nil
	})
	g.Handle(MethodExecAskList, gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		return map[string]any{"asks": s.Asks()}, nil
	})
	g.Handle(MethodPresenceUpdate, gateway.Write(gateway.Operators|gateway.Nodes), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			LastInputSeconds json.RawMessage `json:"lastInputSeconds"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		var secs *float64 // null: the client cannot tell (any more)
		if len(p.LastInputSeconds) == 0 || json.Unmarshal(p.LastInputSeconds, &secs) != nil || secs != nil && *secs < 0 {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "presence.update: lastInputSeconds (a number ≥ 0, or null for unknown) is required")
		}
		if !s.Input(c.ConnID, secs) {
			return nil, gateway.Errorf(gateway.CodeUnavailable, "presence.update: this connection is not registered yet")
		}
		return nil, nil
	})
}

// Input records lastInputSeconds for connection connID's presence entry
// (nil: unknown, the entry then has none; re-creating the entry when it
// was dropped for space; a node's lastSeen becomes now) and announces the
// change. False when connID is not an open connection.
func (s *Service) Input(connID string, lastInputSeconds *float64) bool {
	s.mu.Lock()
	ps := s.peers[connID]
	var p peer
	if ps != nil {
		p = ps.p
		if ns := s.nodes[p.nodeID()]; ns != nil && p.isNode() {
			ns.node.LastSeen = s.o.Now().UnixMilli()
		}
	}
	s.mu.Unlock()
	if ps == nil {
		return false
	}
	if !inPresence(p) {
		return true
	}
	if !s.presence.Input(ps.key, connID, lastInputSeconds) {
		e := presenceOf(p)
		e.LastInputSeconds = lastInputSeconds
		s.presence.Seen(connID, e)
	}
	s.changed()
	return true
}

// mayInvoke asks Options.MayInvoke about a paired operator device's
// node.invoke; a refusal is FORBIDDEN and audited.
func (s *Service) mayInvoke(ctx context.Context, c *gateway.Call, p InvokeRequest) error {
	if s.o.MayInvoke == nil || c.Principal.Role != gateway.RoleOperator || c.Principal.Device == "" {
		return nil
	}
	err := s.o.MayInvoke(ctx, c.Principal.Device)
	if err == nil {
		return nil
	}
	target := p.NodeID + " " + p.Command
	s.auditAs(MethodNodeInvoke, callerOf(c), target, false, err.Error())
	return gateway.Errorf(gateway.CodeForbidden, "node.invoke: %v", err)
}

func callerOf(c *gateway.Call) Caller { return Caller{Role: AuditRole(c.Principal), IP: c.RemoteIP} }
