package gateway

import (
	"strings"
)

// Principal is who a connection acts for, fixed by its handshake. Results
// kept for idempotency are kept per principal, so one principal never gets
// another's answer, and each method's [Kind] states which classes of
// principal ([Callers]) may call it.
//
// The principals (issue 16, docs/PROTOCOL.md "Who may call"):
//   - the local operator ("admin"): the operator token, role "operator" —
//     {Role: "operator"}; accepted on loopback listeners only;
//   - a paired operator device: {Role: "operator", Device: <deviceId>};
//   - a paired node device: {Role: "node", Device: <deviceId>};
//   - the local node: the operator token with role "node" — {Role: "node"};
//   - an unpaired device (its pairing request pending):
//     {Role: "unpaired", Device: <deviceId>}.
type Principal struct {
	// Role is RoleOperator, RoleNode or RoleUnpaired.
	Role string `json:"role"`
	// Device is the device's id (hex SHA-256 of its public key), "" for the
	// operator token.
	Device string `json:"device,omitempty"`
}

// Key is the principal's identity as a string: "operator", "node", or
// "<role>/device:<id>" (a device). Two connections share a key only
// when they hold the same credential.
func (p Principal) Key() string {
	if p.Device == "" {
		return p.Role
	}
	return p.Role + "/device:" + p.Device
}

// Class is the principal's class: exactly one bit of [Callers], or 0 for a
// principal that is none of them (never admitted by the handshake).
func (p Principal) Class() Callers {
	switch {
	case p.Role == RoleOperator && p.Device == "":
		return Admin
	case p.Role == RoleOperator:
		return OperatorDevice
	case p.Role == RoleNode && p.Device == "":
		return LocalNode
	case p.Role == RoleNode:
		return NodeDevice
	case p.Role == RoleUnpaired && p.Device != "":
		return Unpaired
	}
	return 0
}

// Callers is a set of principal classes (bits), e.g. Admin|OperatorDevice.
type Callers uint8

// The principal classes.
const (
	// Admin is the local operator: the operator token with role operator,
	// on a loopback listener (the person at this machine).
	Admin Callers = 1 << iota
	// OperatorDevice is a paired device connected with role operator (the
	// UI on a phone or another computer): chat, memory, history.
	OperatorDevice
	// NodeDevice is a paired device connected with role node: it lends its
	// capabilities and calls only node methods.
	NodeDevice
	// LocalNode is the operator token with role node (tests, a node on
	// this machine): the rights of a NodeDevice.
	LocalNode
	// Unpaired is a device whose pairing request is pending: health and
	// device.pair.status only.
	Unpaired
)

// Common sets of callers.
const (
	// Operators are the person's connections: Admin and OperatorDevice.
	Operators = Admin | OperatorDevice
	// Nodes are the node connections: NodeDevice and LocalNode.
	Nodes = NodeDevice | LocalNode
	// Everyone is every principal class, Unpaired included.
	Everyone = Operators | Nodes | Unpaired
)

var callerNames = [...]struct {
	c    Callers
	name string
}{{Admin, "admin"}, {OperatorDevice, "operator device"}, {NodeDevice, "node device"}, {LocalNode, "local node"}, {Unpaired, "unpaired"}}

// Has reports whether every class in o is in c (o non-zero).
func (c Callers) Has(o Callers) bool { return o != 0 && c&o == o }

// String lists the classes, comma-separated, in the order admin, operator
// device, node device, local node, unpaired ("" for none).
func (c Callers) String() string {
	var out []string
	for _, n := range callerNames {
		if c&n.c != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ", ")
}

// Kind declares, for each method, whether it changes state and which
// principals may call it. [Server.Handle] needs one: there is no default.
// Build one with [Read] or [Write].
type Kind struct {
	// Write marks a method with side effects: params.idempotencyKey is
	// required (INVALID_REQUEST without), and a repeat within
	// [IdempotencyWindow] by the same principal with the same params gets
	// the first result. A read method accepts and ignores the key.
	Write bool
	// Who may call it; any other principal gets FORBIDDEN before the
	// handler runs, and the refusal goes to the [Server.OnForbidden] hook.
	Who Callers
}

// Read is the kind of a method without side effects callable by who.
func Read(who Callers) Kind { return Kind{Who: who} }

// Write is the kind of a method with side effects callable by who.
func Write(who Callers) Kind { return Kind{Write: true, Who: who} }

// SideEffects reports whether k is a write kind.
func (k Kind) SideEffects() bool { return k.Write }

// Allows reports whether principal p may call a method of kind k.
func (k Kind) Allows(p Principal) bool { return k.Who.Has(p.Class()) }

func (k Kind) valid() bool { return k.Who != 0 && k.Who&^Everyone == 0 }

// String is "read" or "write" (the who is Kind.Who.String()); "invalid"
// for the zero Kind.
func (k Kind) String() string {
	switch {
	case !k.valid():
		return "invalid"
	case k.Write:
		return "write"
	}
	return "read"
}
