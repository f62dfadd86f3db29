package gateway

// Principal is who a connection acts for, fixed by its handshake. Results
// kept for idempotency are kept per principal, so one principal never gets
// another's answer, and method kinds ([Kind]) are checked against its role.
//
// Today two principals exist: the operator (connections that presented the
// local operator token with role "operator") and the node principal (role
// "node", same token). Node connections share one principal because they
// hold the same credential and the same rights (ACL principal
// `authenticated`). Paired devices (SPEC §7) will authenticate with their
// own key; their connections then carry the device id in Device and are
// distinct principals.
type Principal struct {
	// Role is RoleOperator or RoleNode.
	Role string `json:"role"`
	// Device is the paired device's id, "" for the local operator token.
	Device string `json:"device,omitempty"`
}

// Key is the principal's identity as a string: "operator", "node", or
// "node/device:<id>" (a paired device). Two connections share a key only
// when they hold the same credential.
func (p Principal) Key() string {
	if p.Device == "" {
		return p.Role
	}
	return p.Role + "/device:" + p.Device
}

// Kind declares, for each method, whether it changes state and which
// connections may call it. [Server.Handle] needs one: there is no default.
type Kind uint8

const (
	// Read changes nothing; operator and node connections may call it (the
	// handler may narrow what a node sees, e.g. by the ACL). An
	// idempotencyKey is accepted and ignored.
	Read Kind = iota + 1
	// ReadOperator changes nothing; node connections get FORBIDDEN before
	// the handler runs.
	ReadOperator
	// Write has side effects; operator and node connections may call it.
	// params.idempotencyKey is required (INVALID_REQUEST without), and a
	// repeat within [IdempotencyWindow] by the same principal with the same
	// params gets the first result.
	Write
	// WriteOperator is [Write] for operator connections only: node
	// connections get FORBIDDEN before the handler runs.
	WriteOperator
)

// SideEffects reports whether k is Write or WriteOperator.
func (k Kind) SideEffects() bool { return k == Write || k == WriteOperator }

// OperatorOnly reports whether node connections are refused.
func (k Kind) OperatorOnly() bool { return k == ReadOperator || k == WriteOperator }

func (k Kind) valid() bool { return k >= Read && k <= WriteOperator }

// String is "read", "read (operator)", "write" or "write (operator)".
func (k Kind) String() string {
	switch k {
	case Read:
		return "read"
	case ReadOperator:
		return "read (operator)"
	case Write:
		return "write"
	case WriteOperator:
		return "write (operator)"
	}
	return "invalid"
}
