// Package devices admits devices to the gateway (issue 16, part A): it is
// the gateway's Authenticate hook (a device proves its key with a v2
// connect signature for this gateway's id and this connection's nonce,
// then presents its device token, a setup code, or nothing to ask for a
// repair) and serves the device methods: device.pair.code (setup code,
// URL, QR PNG), device.pair.list/approve/reject/status, device.list,
// device.token.rotate/revoke and device.remove, with the events
// device.pair.requested, device.pair.resolved, devices.changed and
// device.token.rotated. Records, codes and requests live in the one
// pairing store (package pairing); plaintext device tokens exist only in
// the approval's delivery (the pending connection's event, and for
// Options.TokenHold in memory for a reconnect's hello-ok).
//
// Every refused connect is answered with an *gateway.Error the gateway
// reports to its OnForbidden hook (audited by the app); every refusal and
// every change made by a device method is recorded in the audit log here.
package devices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/pairing"
)

// MaxPendingConns is how many connections of one device waiting for its
// pairing stay open: a newer one closes the oldest (4001 ReasonReplaced).
// They left the gateway's pre-handshake caps, and a retry, a second socket
// or a reconnect over a dead one needs only a few.
const MaxPendingConns = 4

// DefaultTokenHold is how long approved tokens wait in memory for a
// device that reconnects with its proof before it has fetched them.
const DefaultTokenHold = 5 * time.Minute

// Events sent by the service.
const (
	EventPairRequested  = "device.pair.requested" // {request}: to admin connections
	EventPairResolved   = "device.pair.resolved"  // {requestId, deviceId, decision, deviceTokens?}
	EventDevicesChanged = "devices.changed"       // {}: to admin connections
	EventTokenRotated   = "device.token.rotated"  // {role, deviceToken}: to the device's connections
	// EventCodeLocked {codeId, wrongTries}: to admin connections, when a
	// setup code is locked after wrong tries (package pairing).
	EventCodeLocked = "device.pair.code.locked"
)

// Events lists the events for gateway.DeclareEvents.
var Events = []string{EventPairRequested, EventPairResolved, EventDevicesChanged, EventTokenRotated, EventScopeChanged, EventCodeLocked}

// Close codes and reasons for connections the service ends.
const (
	ReasonRevoked  = "device token revoked"
	ReasonRemoved  = "device removed"
	ReasonRejected = "pairing request rejected"
	ReasonReplaced = "replaced by a newer connection of this device waiting for pairing"
)

// PairInfo is where a device reaches this gateway, for device.pair.code:
// BaseURLs are "https://<host>:<port>" (one per LAN address) or, on a
// loopback-only bind, "http://127.0.0.1:<port>"; the first is the one in
// the QR code. Fingerprint is the TLS certificate's SHA-256 (hex), with
// its words and SPKI pin; "" without TLS.
type PairInfo struct {
	BaseURLs         []string
	Fingerprint      string
	FingerprintWords string
	SPKI             string
	// LoopbackOnly: the gateway listens on loopback only (no device on
	// another machine can reach it); device.pair.code says so.
	LoopbackOnly bool
}

// Options configure a Service. Pairing, Gateway and GatewayID are
// required; PairInfo is required for device.pair.code.
type Options struct {
	Pairing   *pairing.Service
	Gateway   *gateway.Server
	GatewayID string // this gateway's id (package gwid): devices sign it
	// PairInfo says where devices reach the gateway (called per code).
	PairInfo func() PairInfo
	// Audit records refusals and changes; nil records nothing (tests).
	Audit *audit.Log
	// Roles lists the roles a device may be scoped to (role:<name>; the
	// workspace's roles). nil: only the scopes authenticated and admin are
	// accepted.
	Roles func(ctx context.Context) ([]string, error)
	// TokenHold: default DefaultTokenHold.
	TokenHold time.Duration
	Logger    *slog.Logger     // default slog.Default()
	Now       func() time.Time // default time.Now
}

// Service is the device admission service. Safe for concurrent use.
type Service struct {
	o   Options
	log *slog.Logger

	// resMu orders the ends of requests (resolve) against the submission
	// and the confirmation of pending connections (resolve.go); taken
	// before mu, never after it.
	resMu    sync.Mutex
	resolved map[string]*resolution // requestId → how it ended, for resolvedMemory

	mu   sync.Mutex
	held map[string]heldTokens // deviceId → tokens approved but not yet fetched
	live map[string]string     // requestId → deviceId of requests submitted and not yet resolved

	scopeMu sync.Mutex               // held across a scope's store write and its cache update (scope.go)
	scopes  map[string]pairing.Scope // deviceId → memory scope, as stored

	afterTokenCheck func(deviceID string)  // tests: runs after a device token matched, before registration
	afterRequest    func(requestID string) // tests: runs after a request was submitted, before registration
}

type heldTokens struct {
	tokens map[string]string
	until  time.Time
}

// New checks o and applies the defaults.
func New(o Options) (*Service, error) {
	if o.Pairing == nil || o.Gateway == nil || o.GatewayID == "" {
		return nil, errors.New("devices: Options.Pairing, Gateway and GatewayID are required")
	}
	if o.TokenHold <= 0 {
		o.TokenHold = DefaultTokenHold
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o, log: o.Logger, held: map[string]heldTokens{}, live: map[string]string{}, scopes: map[string]pairing.Scope{},
		resolved: map[string]*resolution{}}, nil
}

// record writes an audit entry (errors are logged: the decision stands).
func (s *Service) record(op, who, target, ip string, allowed bool, reason string) {
	if s.o.Audit == nil {
		return
	}
	if err := s.o.Audit.Record(audit.Entry{Operation: op, Role: who, Target: target, Result: audit.Result(allowed), Reason: reason, IP: ip}); err != nil {
		s.log.Error("device audit failed", "operation", op, "err", err)
	}
}

// auditRole names a caller in the audit log: admin, or authenticated for
// a paired device (its id goes into the target).
func auditRole(p gateway.Principal) string {
	if p.Class() == gateway.Admin {
		return "admin"
	}
	if p.Class() == gateway.Unpaired {
		return "anonymous"
	}
	return "authenticated"
}

// takeHeld returns and forgets the tokens held for id, if still live.
func (s *Service) takeHeld(id string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[id]
	delete(s.held, id)
	if !ok || !s.o.Now().Before(h.until) {
		return nil
	}
	return h.tokens
}

func (s *Service) peekHeld(id string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[id]
	if !ok || !s.o.Now().Before(h.until) {
		return nil
	}
	return h.tokens
}

func (s *Service) hold(id string, tokens map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	for k, h := range s.held {
		if !now.Before(h.until) {
			delete(s.held, k)
		}
	}
	if tokens == nil {
		delete(s.held, id)
		return
	}
	s.held[id] = heldTokens{tokens: tokens, until: now.Add(s.o.TokenHold)}
}

// unauthorized is the connect refusal for a bad proof.
func unauthorized(format string, args ...any) *gateway.Error {
	return gateway.Errorf(gateway.CodeUnauthorized, format, args...)
}

func mismatch(id, role string) *gateway.Error {
	e := unauthorized("device token for device %s, role %s does not match (rotated or revoked?); drop it and reconnect with your key to ask for a repair", short(id), role)
	e.Details = map[string]any{"reason": "device_token_mismatch", "repairable": true}
	return e
}

// short is a device id's first 12 characters (for messages).
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// verify checks the connect proof and returns the verified device id and
// key.
func (s *Service) verify(r *gateway.AuthRequest) (string, device.PublicKey, error) {
	d := r.Params.Device
	if d == nil {
		return "", device.PublicKey{}, unauthorized("a device token or setup code needs params.device (the key's proof)")
	}
	key, err := device.DecodePublicKey(d.Algorithm, d.PublicKey)
	if err != nil {
		return "", device.PublicKey{}, unauthorized("device key: %v", err)
	}
	sig, err := device.DecodeBase64(d.Signature)
	if err != nil {
		return "", device.PublicKey{}, unauthorized("device signature is not base64")
	}
	token := r.Params.Auth.DeviceToken
	if token == "" && r.Params.Auth.SetupCode != "" {
		token = r.Params.Auth.SetupCode
		if norm, ok := pairing.NormalizeCode(token); ok {
			token = norm
		}
	}
	id, err := device.VerifyConnect(device.Proof{ID: d.ID, Key: key, Signature: sig, SignedAt: d.SignedAt, Nonce: d.Nonce},
		device.Payload{Version: 2, ClientID: r.Params.Client.ID, Mode: r.Params.Client.Mode, Role: r.Params.Role,
			Scopes: r.Params.Scopes, Token: token},
		device.Expect{GatewayID: s.o.GatewayID, Nonce: r.Nonce, Now: r.Now})
	if err != nil {
		return "", device.PublicKey{}, unauthorized("device signature refused: %v", err)
	}
	return id, key, nil
}

// Authenticate is the gateway's Options.Authenticate (contract, connect
// decision order 2): verify the proof, then the device token, else the
// setup code (a pairing request), else a repair request for a known key,
// else NOT_PAIRED. Tokens approved for this device and not yet fetched
// admit it as paired and are delivered in hello-ok.
func (s *Service) Authenticate(ctx context.Context, r *gateway.AuthRequest) (*gateway.AuthResult, error) {
	id, key, err := s.verify(r)
	if err != nil {
		return nil, err
	}
	p := r.Params
	role := p.Role
	if p.Auth.DeviceToken != "" {
		d, err := s.o.Pairing.CheckToken(ctx, id, role, p.Auth.DeviceToken)
		switch {
		case errors.Is(err, pairing.ErrNotPaired):
			return nil, gateway.Errorf(gateway.CodeNotPaired, "device %s is not paired with this gateway; pair it with a setup code", short(id))
		case errors.Is(err, pairing.ErrTokenMismatch):
			return nil, mismatch(id, role)
		case err != nil:
			return nil, fmt.Errorf("check device token: %w", err)
		}
		s.takeHeld(id) // it has its tokens
		if s.afterTokenCheck != nil {
			s.afterTokenCheck(id)
		}
		return s.paired(d, p, nil), nil
	}
	if held := s.takeHeld(id); held != nil {
		if _, ok := held[role]; ok {
			d, err := s.o.Pairing.Device(ctx, id)
			if err == nil {
				return s.paired(d, p, held), nil
			}
		} else {
			s.hold(id, held) // not for this role: keep them for the next connect
		}
	}
	roles := []string{} // what it asks for: operator and/or node, each once
	for _, r := range p.Roles {
		if r != gateway.RoleOperator && r != gateway.RoleNode {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "roles: unknown role %q (operator or node)", r)
		}
		if !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		roles = []string{role}
	}
	if !slices.Contains(roles, role) {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "roles %v do not include the connection's role %s", roles, role)
	}
	req := pairing.Request{DeviceID: id, Algorithm: string(key.Alg), PublicKey: key.Encode(), DisplayName: p.Client.DisplayName,
		Platform: p.Client.Platform, Roles: roles, Commands: p.Commands, Caps: p.Caps, RemoteIP: r.RemoteIP}
	if req.DisplayName == "" {
		req.DisplayName = p.Client.ID
	}
	was, pairedErr := s.o.Pairing.Device(ctx, id)
	known := pairedErr == nil
	if pairedErr != nil && !errors.Is(pairedErr, pairing.ErrNotPaired) {
		return nil, fmt.Errorf("read paired device: %w", pairedErr)
	}
	req.Repair = known
	switch {
	case p.Auth.SetupCode != "":
		red, err := s.o.Pairing.Redeem(ctx, p.Auth.SetupCode, id, r.RemoteIP)
		s.announceLocked(red.Locked, r.RemoteIP)
		if err != nil {
			return nil, codeError(err)
		}
	case known || s.hasPending(ctx, id):
	default:
		return nil, gateway.Errorf(gateway.CodeNotPaired, "device %s is not paired with this gateway; scan a pairing QR code or enter a setup code", short(id))
	}
	s.resMu.Lock() // the request is tracked before anyone can resolve it (resolve.go)
	stored, err := s.o.Pairing.Submit(ctx, req)
	refresh := err == nil && s.track(stored.ID, id)
	s.resMu.Unlock()
	if errors.Is(err, pairing.ErrWidened) {
		e := gateway.Errorf(gateway.CodeConflict, "this device's pending pairing request cannot ask for more while it waits (%v); "+
			"connect with what it asked for, or ask again after the decision", err)
		return nil, detail(e, "request_widened")
	}
	if errors.Is(err, pairing.ErrTooManyPending) {
		return nil, gateway.Errorf(gateway.CodeUnavailable, "too many pairing requests are waiting; try again later")
	}
	if err != nil {
		return nil, fmt.Errorf("pairing request: %w", err)
	}
	if !refresh { // a refresh is not a new request: audited once
		s.record("device.pair.request", "anonymous", "device:"+id, r.RemoteIP, true,
			fmt.Sprintf("pairing request %s (%s) for roles %v from %q", stored.ID, kindOf(stored), roles, stored.DisplayName))
	}
	s.closeOldPending(id)
	s.o.Gateway.BroadcastTo(gateway.Admin, EventPairRequested, map[string]any{"request": requestView(stored, was.Scope)})
	if s.afterRequest != nil {
		s.afterRequest(stored.ID)
	}
	return &gateway.AuthResult{Principal: gateway.Principal{Role: gateway.RoleUnpaired, Device: id},
		Status: gateway.AuthPending, RequestID: stored.ID, Confirm: s.pendingConfirm(stored.ID, r.ConnID)}, nil
}

func kindOf(r pairing.Request) string {
	if r.Repair {
		return "repair"
	}
	return "pair"
}

func (s *Service) hasPending(ctx context.Context, id string) bool {
	pend, err := s.o.Pairing.Pending(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(pend, func(r pairing.Request) bool { return r.DeviceID == id })
}

// announceLocked tells admin connections (EventCodeLocked), the audit log
// and the log that the codes ids were locked by a wrong try from ip.
func (s *Service) announceLocked(ids []string, ip string) {
	for _, id := range ids {
		s.log.Warn("setup code locked", "codeId", id, "wrongTries", s.o.Pairing.MaxWrongTries(), "ip", ip)
		s.record("device.pair.code.locked", "anonymous", "setup code "+id, ip, false,
			fmt.Sprintf("setup code locked after %d wrong tries on the network (the last from this address)", s.o.Pairing.MaxWrongTries()))
		s.o.Gateway.BroadcastTo(gateway.Admin, EventCodeLocked, map[string]any{"codeId": id, "wrongTries": s.o.Pairing.MaxWrongTries()})
	}
}

// codeError maps a setup-code refusal to a connect error.
func codeError(err error) error {
	var rl *pairing.RateLimitError
	var le *pairing.LockedError
	switch {
	case errors.As(err, &le):
		e := unauthorized("this setup code was locked after %d wrong tries; make a new one (Nodes → Pair a phone or computer, or atrium pair)", le.WrongTries)
		e.Details = map[string]any{"reason": "code_locked", "wrongTries": le.WrongTries}
		return e
	case errors.As(err, &rl):
		e := unauthorized("too many wrong setup codes; try again in %s", rl.RetryAfter.Round(time.Second))
		e.Details = map[string]any{"reason": "rate_limited", "retryAfterMs": rl.RetryAfter.Milliseconds()}
		return e
	case errors.Is(err, pairing.ErrUsed):
		return detail(unauthorized("this setup code was already used; ask for a new one"), "code_used")
	case errors.Is(err, pairing.ErrExpired):
		return detail(unauthorized("this setup code has expired; ask for a new one"), "code_expired")
	case errors.Is(err, pairing.ErrInvalidCode):
		return detail(unauthorized("unknown setup code"), "code_invalid")
	}
	return fmt.Errorf("redeem setup code: %w", err)
}

func detail(e *gateway.Error, reason string) *gateway.Error {
	e.Details = map[string]any{"reason": reason}
	return e
}

// paired admits the paired device d with the connect params p: a node
// may use what it declared and was approved.
func (s *Service) paired(d pairing.Device, p gateway.ConnectParams, tokens map[string]string) *gateway.AuthResult {
	res := &gateway.AuthResult{Principal: gateway.Principal{Role: p.Role, Device: d.DeviceID}, Status: gateway.AuthPaired, DeviceTokens: tokens}
	if p.Role == gateway.RoleNode {
		res.Caps = intersect(p.Caps, d.Caps)
		res.Commands = intersect(p.Commands, d.Commands)
	}
	res.Confirm = s.confirm(d.DeviceID, p.Role, d.Tokens[p.Role].Hash)
	return res
}

// confirm re-reads the device once its connection is registered: a
// device.token.revoke, rotate or device.remove that landed after the
// token was checked, and so found no connection to close, closes it here
// (4001 ReasonRevoked or ReasonRemoved).
func (s *Service) confirm(id, role, hash string) func(context.Context) *gateway.Error {
	return func(ctx context.Context) *gateway.Error {
		d, err := s.o.Pairing.Device(ctx, id)
		switch {
		case errors.Is(err, pairing.ErrNotPaired):
			return gateway.Errorf(gateway.CodeUnauthorized, ReasonRemoved)
		case err != nil:
			s.log.Error("confirm device token", "device", id, "err", err)
			return gateway.Errorf(gateway.CodeUnavailable, "could not read the device's pairing; try again")
		}
		if hash == "" || d.Tokens[role].Hash != hash || !d.HasRole(role) {
			return gateway.Errorf(gateway.CodeUnauthorized, ReasonRevoked)
		}
		return nil
	}
}

// intersect keeps the elements of declared that approved holds.
func intersect(declared, approved []string) []string {
	out := []string{}
	for _, c := range declared {
		if slices.Contains(approved, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// DefaultSweepInterval is how often Run looks for expired requests.
const DefaultSweepInterval = 15 * time.Second

// ReasonExpired closes a pending connection whose request expired.
const ReasonExpired = "pairing request expired"

// track records a submitted request; true when it was tracked already (a
// refresh).
func (s *Service) track(requestID, deviceID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live[requestID]
	s.live[requestID] = deviceID
	return ok
}

// closeOldPending closes the oldest pending connections of device id so
// that, with the one being admitted, at most MaxPendingConns stay.
func (s *Service) closeOldPending(id string) {
	conns := s.o.Gateway.Conns(deviceConns(id, gateway.RoleUnpaired))
	if len(conns) < MaxPendingConns {
		return
	}
	slices.SortFunc(conns, func(a, b gateway.ConnInfo) int { return a.ConnectedAt.Compare(b.ConnectedAt) })
	old := map[string]bool{}
	for _, ci := range conns[:len(conns)-MaxPendingConns+1] {
		old[ci.ConnID] = true
	}
	s.o.Gateway.CloseWhere(func(ci gateway.ConnInfo) bool { return old[ci.ConnID] }, gateway.CloseUnauthorized, ReasonReplaced)
}

// untrack forgets a resolved request; false when it was not tracked.
func (s *Service) untrack(requestID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live[requestID]
	delete(s.live, requestID)
	return ok
}

// Run sweeps expired requests every DefaultSweepInterval until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(DefaultSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.Sweep(ctx)
		}
	}
}

// Sweep resolves the requests that expired since they were submitted:
// device.pair.resolved {decision:"expired"} to admin connections and to the
// device's pending connections, which are then closed (4001 "pairing
// request expired").
func (s *Service) Sweep(ctx context.Context) {
	s.resMu.Lock()
	pend, err := s.o.Pairing.Pending(ctx) // deletes the expired ones
	if err != nil {
		s.resMu.Unlock()
		s.log.Warn("pairing sweep failed", "err", err)
		return
	}
	s.mu.Lock()
	gone := map[string]string{}
	for id, dev := range s.live {
		if !slices.ContainsFunc(pend, func(r pairing.Request) bool { return r.ID == id }) {
			gone[id] = dev
		}
	}
	s.mu.Unlock()
	for id, dev := range gone {
		s.resolveLocked(id, dev, decisionExpired, nil)
	}
	s.resMu.Unlock()
	for id, dev := range gone {
		s.o.Gateway.BroadcastTo(gateway.Admin, EventPairResolved, map[string]any{"requestId": id, "deviceId": dev, "decision": decisionExpired})
	}
}

// ConnClosed records the device's last-seen time when its connection ends
// (for gateway.Options.OnClosed).
func (s *Service) ConnClosed(ci gateway.ConnInfo) {
	cls := ci.Principal.Class()
	if cls != gateway.OperatorDevice && cls != gateway.NodeDevice {
		return
	}
	if err := s.o.Pairing.Touch(context.Background(), ci.Principal.Device); err != nil && !errors.Is(err, pairing.ErrNotPaired) {
		s.log.Warn("device last seen not recorded", "device", ci.Principal.Device, "err", err)
	}
}
