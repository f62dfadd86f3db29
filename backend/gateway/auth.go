package gateway

import (
	"context"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/coder/websocket"
)

// AuthRequest is a connect request without an operator token, handed to
// Options.Authenticate: a device that proves its key (Params.Device) and
// presents a device token or a setup code, or neither (a repair).
type AuthRequest struct {
	// ConnID is the connection's id ([Server.Send] reaches it once the
	// handshake succeeded, e.g. to deliver device.pair.resolved).
	ConnID string
	// Nonce is the nonce this connection's connect.challenge sent: the
	// proof must have signed it.
	Nonce string
	// Params are the connect params as sent (Role defaulted to operator).
	Params ConnectParams
	// RemoteIP is the peer's IP address.
	RemoteIP string
	// Loopback reports whether the connection came on a loopback listener.
	Loopback bool
	// Now is the gateway's clock at the connect request.
	Now time.Time
}

// AuthResult admits a device connection. Principal must be of class
// [OperatorDevice], [NodeDevice] (Status [AuthPaired]) or [Unpaired]
// (Status [AuthPending], RequestID set). Caps and Commands are what the
// node may use (approved ∩ declared). DeviceTokens are delivered in
// hello-ok auth.deviceTokens (plaintext, only right after an approval).
//
// Confirm, when set, is called once the connection is registered (visible
// to [Server.CloseWhere]) and before hello-ok reaches the client: it
// re-checks the credential that admitted it, so a revoke that lands
// between Authenticate and the registration cannot leave the connection
// open (the revoke either finds it registered or Confirm sees the revoke).
// A non-nil *Error closes the connection with code 4001 and its message,
// without hello-ok.
type AuthResult struct {
	Principal    Principal
	Status       string
	RequestID    string
	DeviceTokens map[string]string
	Caps         []string
	Commands     []string
	Confirm      func(ctx context.Context) *Error
}

// ConnInfo describes an authenticated connection, for the OnAuthenticated
// and OnClosed hooks and [Server.CloseWhere]. Caps and Commands: for node
// connections what they may use (a paired node: declared ∩ approved; the
// local node: declared); empty for others.
type ConnInfo struct {
	ConnID      string
	Principal   Principal
	Client      ClientInfo
	RemoteIP    string
	Caps        []string
	Commands    []string
	ConnectedAt time.Time
	// Loopback reports whether it came on a loopback listener.
	Loopback bool
}

// ExternalHandler is [Server.Handler] for a listener on a non-loopback
// address (LAN, TLS): connections through it never accept the operator
// token (FORBIDDEN "operator token is accepted on loopback only; pair this
// device"), whatever their addresses. [Server.Handler] accepts it only when
// the connection's local address is a loopback address.
func (s *Server) ExternalHandler() http.Handler { return s.external }

type externalKey struct{}

// onLoopbackListener reports whether r came through [Server.Handler] on a
// connection whose local address is a loopback IP.
func onLoopbackListener(r *http.Request) bool {
	if ext, _ := r.Context().Value(externalKey{}).(bool); ext {
		return false
	}
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	var ip net.IP
	switch a := la.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(la.String())
		if err != nil {
			return false
		}
		ip = net.ParseIP(host)
	}
	return ip != nil && ip.IsLoopback()
}

// Conns lists the authenticated connections for which keep returns true
// (nil keeps all), in no particular order.
func (s *Server) Conns(keep func(ConnInfo) bool) []ConnInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []ConnInfo
	for _, c := range s.authed {
		if keep == nil || keep(c.info) {
			out = append(out, c.info)
		}
	}
	return out
}

// CloseWhere closes every authenticated connection for which match
// returns true with the WebSocket close code and reason (queued frames are
// sent first) and returns how many it closed. E.g. revoking a device's
// token: code 4001, reason "device token revoked".
func (s *Server) CloseWhere(match func(ConnInfo) bool, code websocket.StatusCode, reason string) int {
	s.mu.RLock()
	var targets []*conn
	for _, c := range s.authed {
		if match(c.info) {
			targets = append(targets, c)
		}
	}
	s.mu.RUnlock()
	for _, c := range targets {
		c.closeWith(code, reason, true)
	}
	return len(targets)
}

// BroadcastTo is [Server.Broadcast] to the authenticated connections whose
// principal class is in who (e.g. [Admin] for pairing requests).
func (s *Server) BroadcastTo(who Callers, event string, payload any) {
	s.broadcast(func(c *conn) bool { return who.Has(c.principal.Class()) }, event, payload)
}

// DeviceEventFilter decides what of a broadcast event a paired operator
// device's connections get: body (the payload's JSON) as is, a narrowed
// copy, or nothing (ok false). It runs under the gateway's broadcast lock,
// once per device and event: it must be quick and must not broadcast.
type DeviceEventFilter func(p Principal, event string, body []byte) (out []byte, ok bool)

// OnDeviceEvent sets f, applied to every [Server.Broadcast] and
// [Server.BroadcastTo] event bound for connections of class
// [OperatorDevice] (a paired device's scope may not cover every run or
// file the person's connections see; package api). Events sent with
// [Server.Send] are not filtered. Set it before serving.
func (s *Server) OnDeviceEvent(f DeviceEventFilter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deviceEvents = f
}

// refuse reports a refused connect to the OnForbidden hook (audit): call
// Method "connect", the principal as far as known.
func (c *conn) refuse(p ConnectParams, reason string) {
	_, forbidden := c.s.lookup("")
	if forbidden == nil {
		return
	}
	pr := Principal{}
	if p.Device != nil {
		pr.Device = p.Device.ID
	}
	forbidden(&Call{ConnID: c.id, Method: MethodConnect, Client: p.Client, Role: p.Role,
		RemoteIP: remoteIP(c.remote), Principal: pr}, reason)
}

func cloneStrings(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(v)
}

// authenticate decides who the connect request p acts for: the operator
// token (loopback listeners only) or Options.Authenticate for a device.
// On refusal it returns the error to send and the close code.
func (c *conn) authenticate(p *ConnectParams) (*AuthResult, *Error, websocket.StatusCode) {
	if p.Auth.Token != "" {
		if !c.loopback {
			return nil, Errorf(CodeForbidden, "operator token is accepted on loopback only; pair this device"), CloseUnauthorized
		}
		if !tokenEqual(p.Auth.Token, c.s.opts.Token) {
			return nil, Errorf(CodeUnauthorized, "missing or wrong token"), CloseUnauthorized
		}
		switch p.Role {
		case RoleOperator:
			return &AuthResult{Principal: Principal{Role: RoleOperator}, Status: AuthOperator}, nil, 0
		case RoleNode:
			return &AuthResult{Principal: Principal{Role: RoleNode}, Status: AuthOperator,
				Caps: cloneStrings(p.Caps), Commands: cloneStrings(p.Commands)}, nil, 0
		}
		return nil, Errorf(CodeInvalidRequest, "unknown role %q", p.Role), CloseHandshakeFailed
	}
	if p.Device == nil && p.Auth.DeviceToken == "" && p.Auth.SetupCode == "" {
		return nil, Errorf(CodeUnauthorized, "missing or wrong token"), CloseUnauthorized
	}
	if c.s.opts.Authenticate == nil {
		return nil, Errorf(CodeUnauthorized, "device authentication is not enabled on this gateway"), CloseUnauthorized
	}
	if p.Role != RoleOperator && p.Role != RoleNode {
		return nil, Errorf(CodeInvalidRequest, "unknown role %q", p.Role), CloseHandshakeFailed
	}
	res, err := c.s.opts.Authenticate(c.ctx, &AuthRequest{ConnID: c.id, Nonce: c.nonce, Params: *p,
		RemoteIP: remoteIP(c.remote), Loopback: c.loopback, Now: c.s.now()})
	if err != nil {
		e := toError(err)
		code := CloseUnauthorized
		switch e.Code {
		case CodeInvalidRequest:
			code = CloseHandshakeFailed
		case CodeInternal, CodeUnavailable, CodeTimeout:
			code = websocket.StatusTryAgainLater
		}
		return nil, e, code
	}
	cls := res.Principal.Class()
	ok := (cls == OperatorDevice || cls == NodeDevice) && res.Status == AuthPaired ||
		cls == Unpaired && res.Status == AuthPending && res.RequestID != ""
	if !ok {
		c.s.log.Error("authenticate hook returned an invalid result", "connId", c.id, "role", res.Principal.Role, "status", res.Status)
		return nil, &Error{Code: CodeInternal, Message: "device authentication failed"}, websocket.StatusInternalError
	}
	if cls != NodeDevice {
		res.Caps, res.Commands = nil, nil
	}
	return res, nil, 0
}
