package devices

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/pairing"
)

// QRSize is the side of device.pair.code's QR PNG, in pixels.
const QRSize = 320

// Register adds the device methods and events to the gateway (docs/PROTOCOL.md
// "Devices and pairing"). Call it before the gateway serves.
func (s *Service) Register() {
	g := s.o.Gateway
	g.DeclareEvents(Events...)
	g.Handle("device.pair.code", gateway.Write(gateway.Admin), s.pairCode)
	g.Handle("device.pair.list", gateway.Read(gateway.Admin), s.pairList)
	g.Handle("device.pair.approve", gateway.Write(gateway.Admin), s.pairApprove)
	g.Handle("device.pair.reject", gateway.Write(gateway.Admin), s.pairReject)
	g.Handle("device.pair.status", gateway.Read(gateway.Unpaired), s.pairStatus)
	g.Handle("device.list", gateway.Read(gateway.Admin), s.list)
	g.Handle("device.token.rotate", gateway.Write(gateway.Admin|gateway.OperatorDevice|gateway.NodeDevice), s.rotate)
	g.Handle("device.token.revoke", gateway.Write(gateway.Admin), s.revoke)
	g.Handle("device.remove", gateway.Write(gateway.Admin), s.remove)
	g.Handle("device.scope.set", gateway.Write(gateway.Admin), s.scopeSet)
}

// PairCode is device.pair.code's result.
type PairCode struct {
	Code             string    `json:"code"`    // 8 characters, no dash (what the URL carries)
	Display          string    `json:"display"` // "XXXX-XXXX"
	CodeID           string    `json:"codeId"`  // names the code in device.pair.code.locked
	MaxWrongTries    int       `json:"maxWrongTries"`
	ExpiresAt        time.Time `json:"expiresAt"`
	URL              string    `json:"url"`  // the QR code's URL
	URLs             []string  `json:"urls"` // one per address
	QRPNG            string    `json:"qrPng"`
	GatewayID        string    `json:"gatewayId"`
	Fingerprint      string    `json:"fingerprint,omitempty"`
	FingerprintWords string    `json:"fingerprintWords,omitempty"`
	SPKI             string    `json:"spki,omitempty"`
	LoopbackOnly     bool      `json:"loopbackOnly"`
	Note             string    `json:"note,omitempty"`
}

// PairURL is the node page's URL for base ("https://host:port"): the code,
// gateway id and fingerprint travel in the fragment, so they never reach
// a server log or a Referer.
func PairURL(base, code, gatewayID, fingerprint string) string {
	frag := "c=" + url.QueryEscape(code) + "&g=" + url.QueryEscape(gatewayID)
	if fingerprint != "" {
		frag += "&f=" + url.QueryEscape(fingerprint)
	}
	return strings.TrimSuffix(base, "/") + "/pair#" + frag
}

func (s *Service) pairCode(ctx context.Context, c *gateway.Call) (any, error) {
	if s.o.PairInfo == nil {
		return nil, gateway.Errorf(gateway.CodeUnavailable, "device.pair.code: this gateway does not know its address")
	}
	info := s.o.PairInfo()
	if len(info.BaseURLs) == 0 {
		return nil, gateway.Errorf(gateway.CodeUnavailable, "device.pair.code: the gateway is not listening yet")
	}
	is, err := s.o.Pairing.NewCode(ctx)
	if err != nil {
		return nil, fmt.Errorf("device.pair.code: %w", err)
	}
	exp := is.ExpiresAt
	code, _ := pairing.NormalizeCode(is.Code)
	out := PairCode{Code: code, Display: is.Code, CodeID: is.ID, MaxWrongTries: is.MaxWrongTries, ExpiresAt: exp, GatewayID: s.o.GatewayID,
		Fingerprint: info.Fingerprint, FingerprintWords: info.FingerprintWords, SPKI: info.SPKI, LoopbackOnly: info.LoopbackOnly}
	for _, b := range info.BaseURLs {
		out.URLs = append(out.URLs, PairURL(b, code, s.o.GatewayID, info.Fingerprint))
	}
	out.URL = out.URLs[0]
	if info.LoopbackOnly {
		out.Note = "the gateway listens on this machine only (bind loopback): a phone cannot reach this URL; start it with --bind lan to pair devices on the network"
	}
	png, err := qrcode.Encode(out.URL, qrcode.Medium, QRSize)
	if err != nil {
		return nil, fmt.Errorf("device.pair.code: QR code: %w", err)
	}
	out.QRPNG = base64.StdEncoding.EncodeToString(png)
	s.record("device.pair.code", "admin", "setup code "+is.ID, c.RemoteIP, true, "setup code issued, expires "+exp.UTC().Format(time.RFC3339))
	return out, nil
}

// RequestView is a pending request as the methods and events show it.
type RequestView struct {
	RequestID   string    `json:"requestId"`
	DeviceID    string    `json:"deviceId"`
	DisplayName string    `json:"displayName"`
	Platform    string    `json:"platform"`
	Algorithm   string    `json:"algorithm"`
	Roles       []string  `json:"roles"`
	Commands    []string  `json:"commands"`
	Caps        []string  `json:"caps"`
	Kind        string    `json:"kind"` // "pair" or "repair" (a known key)
	RemoteIP    string    `json:"remoteIp"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// Scope is the memory scope the device has now, for a repair (a new
	// device has none until approved; an approval without a scope gives
	// authenticated either way).
	Scope pairing.Scope `json:"scope,omitempty"`
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// requestView shows r; current is the device's scope when it is paired
// already ("" for a new device).
func requestView(r pairing.Request, current pairing.Scope) RequestView {
	v := RequestView{RequestID: r.ID, DeviceID: r.DeviceID, DisplayName: r.DisplayName, Platform: r.Platform, Algorithm: r.Algorithm,
		Roles: nonNil(r.Roles), Commands: nonNil(r.Commands), Caps: nonNil(r.Caps), Kind: kindOf(r), RemoteIP: r.RemoteIP,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
	if r.Repair {
		v.Scope = current
	}
	return v
}

func (s *Service) pairList(ctx context.Context, _ *gateway.Call) (any, error) {
	pend, err := s.o.Pairing.Pending(ctx)
	if err != nil {
		return nil, fmt.Errorf("device.pair.list: %w", err)
	}
	out := make([]RequestView, 0, len(pend))
	scopes := s.currentScopes(ctx)
	for _, r := range pend {
		out = append(out, requestView(r, scopes[r.DeviceID]))
	}
	return map[string]any{"pending": out}, nil
}

// DeviceView is a paired device as device.list shows it (no token hashes).
type DeviceView struct {
	DeviceID    string            `json:"deviceId"`
	DisplayName string            `json:"displayName"`
	Platform    string            `json:"platform"`
	Algorithm   string            `json:"algorithm"`
	Roles       []string          `json:"roles"`
	Commands    []string          `json:"commands"`
	Caps        []string          `json:"caps"`
	CreatedAt   time.Time         `json:"createdAt"`
	LastSeenAt  time.Time         `json:"lastSeenAt"`
	Connected   bool              `json:"connected"`
	Tokens      map[string]string `json:"tokens"` // by role: "active" or "revoked"
	// Scope is what the device reaches in memory as an operator:
	// "authenticated", "role:<name>" or "admin" (package pairing).
	Scope pairing.Scope `json:"scope"`
}

func (s *Service) deviceView(d pairing.Device) DeviceView {
	v := DeviceView{DeviceID: d.DeviceID, DisplayName: d.DisplayName, Platform: d.Platform, Algorithm: d.Algorithm,
		Roles: nonNil(d.Roles), Commands: nonNil(d.Commands), Caps: nonNil(d.Caps), CreatedAt: d.CreatedAt, LastSeenAt: d.LastSeenAt,
		Tokens: map[string]string{}, Scope: d.Scope}
	for _, r := range d.Roles {
		v.Tokens[r] = "revoked"
		if d.Tokens[r].Hash != "" {
			v.Tokens[r] = "active"
		}
	}
	v.Connected = len(s.o.Gateway.Conns(func(ci gateway.ConnInfo) bool { return ci.Principal.Device == d.DeviceID })) > 0
	return v
}

func (s *Service) list(ctx context.Context, _ *gateway.Call) (any, error) {
	ds, err := s.o.Pairing.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("device.list: %w", err)
	}
	out := make([]DeviceView, 0, len(ds))
	for _, d := range ds {
		out = append(out, s.deviceView(d))
	}
	return map[string]any{"devices": out}, nil
}

// pairingErr maps the pairing package's errors to protocol errors.
func pairingErr(method string, err error) error {
	switch {
	case errors.Is(err, pairing.ErrNotFound), errors.Is(err, pairing.ErrNotPaired):
		return gateway.Errorf(gateway.CodeNotFound, "%s: %v", method, err)
	case errors.Is(err, pairing.ErrExpired):
		return gateway.Errorf(gateway.CodeNotFound, "%s: the pairing request expired", method)
	case errors.Is(err, pairing.ErrNotRequested), errors.Is(err, pairing.ErrBadRequest):
		return gateway.Errorf(gateway.CodeInvalidRequest, "%s: %v", method, err)
	}
	return fmt.Errorf("%s: %w", method, err)
}

// deviceConns selects the connections of device id (with role, "" any;
// unpaired: its pending connections).
func deviceConns(id, role string) func(gateway.ConnInfo) bool {
	return func(ci gateway.ConnInfo) bool {
		return ci.Principal.Device == id && (role == "" || ci.Principal.Role == role)
	}
}

// sendTo sends event to every connection of device id with role.
func (s *Service) sendTo(id, role, event string, payload any) int {
	n := 0
	for _, ci := range s.o.Gateway.Conns(deviceConns(id, role)) {
		if s.o.Gateway.Send(ci.ConnID, event, payload) == nil {
			n++
		}
	}
	return n
}

func (s *Service) pairApprove(ctx context.Context, c *gateway.Call) (any, error) {
	var p struct {
		RequestID string   `json:"requestId"`
		Roles     []string `json:"roles"`
		Commands  []string `json:"commands"`
		Scope     string   `json:"scope"`
	}
	if err := gateway.DecodeParams(c, &p); err != nil {
		return nil, err
	}
	if p.RequestID == "" {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "device.pair.approve: requestId is required")
	}
	pend, _ := s.o.Pairing.Pending(ctx)
	i := slices.IndexFunc(pend, func(r pairing.Request) bool { return r.ID == p.RequestID })
	scope, err := s.checkScope(ctx, "device.pair.approve", p.Scope)
	if err != nil {
		if i >= 0 {
			s.record("device.pair.approve", "admin", "device:"+pend[i].DeviceID, c.RemoteIP, false, err.Error())
		}
		return nil, err
	}
	s.scopeMu.Lock()
	d, tokens, err := s.o.Pairing.Approve(ctx, p.RequestID, p.Roles, p.Commands, scope)
	if err == nil {
		s.setCached(d.DeviceID, d.Scope)
	}
	s.scopeMu.Unlock()
	if err != nil {
		if i >= 0 {
			s.record("device.pair.approve", "admin", "device:"+pend[i].DeviceID, c.RemoteIP, false, err.Error())
		}
		return nil, pairingErr("device.pair.approve", err)
	}
	s.hold(d.DeviceID, tokens)
	s.record("device.pair.approve", "admin", "device:"+d.DeviceID, c.RemoteIP, true,
		fmt.Sprintf("request %s approved: roles %v, commands %v, memory scope %s", p.RequestID, d.Roles, d.Commands, d.Scope))
	s.resolve(p.RequestID, d.DeviceID, decisionApproved, tokens)
	s.o.Gateway.BroadcastTo(gateway.Admin, EventPairResolved, map[string]any{"requestId": p.RequestID, "deviceId": d.DeviceID, "decision": "approved"})
	s.o.Gateway.BroadcastTo(gateway.Admin, EventDevicesChanged, struct{}{})
	return map[string]any{"device": s.deviceView(d)}, nil
}

func (s *Service) pairReject(ctx context.Context, c *gateway.Call) (any, error) {
	var p struct {
		RequestID string `json:"requestId"`
	}
	if err := gateway.DecodeParams(c, &p); err != nil {
		return nil, err
	}
	r, err := s.o.Pairing.Take(ctx, p.RequestID)
	if err != nil {
		return nil, pairingErr("device.pair.reject", err)
	}
	s.record("device.pair.reject", "admin", "device:"+r.DeviceID, c.RemoteIP, true, "request "+r.ID+" rejected")
	s.resolve(r.ID, r.DeviceID, decisionRejected, nil)
	s.o.Gateway.BroadcastTo(gateway.Admin, EventPairResolved, map[string]any{"requestId": r.ID, "deviceId": r.DeviceID, "decision": decisionRejected})
	return map[string]any{"rejected": true, "requestId": r.ID}, nil
}

// pairStatus is device.pair.status for an unpaired device: "pending"
// (with requestId), "approved" (with deviceTokens, while held) or "none".
func (s *Service) pairStatus(ctx context.Context, c *gateway.Call) (any, error) {
	id := c.Principal.Device
	if toks := s.peekHeld(id); toks != nil {
		return map[string]any{"status": "approved", "deviceTokens": toks}, nil
	}
	pend, err := s.o.Pairing.Pending(ctx)
	if err != nil {
		return nil, fmt.Errorf("device.pair.status: %w", err)
	}
	for _, r := range pend {
		if r.DeviceID == id {
			return map[string]any{"status": "pending", "requestId": r.ID, "expiresAt": r.ExpiresAt}, nil
		}
	}
	return map[string]any{"status": "none"}, nil
}

func (s *Service) rotate(ctx context.Context, c *gateway.Call) (any, error) {
	var p struct {
		DeviceID string `json:"deviceId"`
		Role     string `json:"role"`
	}
	if err := gateway.DecodeParams(c, &p); err != nil {
		return nil, err
	}
	admin := c.Principal.Class() == gateway.Admin
	switch {
	case admin && p.DeviceID == "":
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "device.token.rotate: deviceId is required")
	case !admin && p.DeviceID == "":
		p.DeviceID = c.Principal.Device
	case !admin && p.DeviceID != c.Principal.Device:
		reason := "a device may rotate only its own token"
		s.record("device.token.rotate", auditRole(c.Principal), "device:"+p.DeviceID, c.RemoteIP, false, reason+" (caller device:"+c.Principal.Device+")")
		return nil, gateway.Errorf(gateway.CodeForbidden, "device.token.rotate: %s", reason)
	}
	if p.Role == "" {
		if admin {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "device.token.rotate: role is required")
		}
		p.Role = c.Principal.Role
	}
	tok, err := s.o.Pairing.RotateToken(ctx, p.DeviceID, p.Role)
	if err != nil {
		s.record("device.token.rotate", auditRole(c.Principal), "device:"+p.DeviceID, c.RemoteIP, false, err.Error())
		return nil, pairingErr("device.token.rotate", err)
	}
	s.hold(p.DeviceID, nil)
	s.record("device.token.rotate", auditRole(c.Principal), "device:"+p.DeviceID, c.RemoteIP, true, "token for role "+p.Role+" rotated")
	s.o.Gateway.BroadcastTo(gateway.Admin, EventDevicesChanged, struct{}{})
	if admin {
		n := 0 // to its paired connections (any role: the device keeps one token per role)
		for _, r := range []string{gateway.RoleOperator, gateway.RoleNode} {
			n += s.sendTo(p.DeviceID, r, EventTokenRotated, map[string]any{"role": p.Role, "deviceToken": tok})
		}
		return map[string]any{"deviceId": p.DeviceID, "role": p.Role, "delivered": n}, nil
	}
	return map[string]any{"deviceId": p.DeviceID, "role": p.Role, "deviceToken": tok}, nil
}

func (s *Service) revoke(ctx context.Context, c *gateway.Call) (any, error) {
	var p struct {
		DeviceID string `json:"deviceId"`
		Role     string `json:"role"`
	}
	if err := gateway.DecodeParams(c, &p); err != nil {
		return nil, err
	}
	if p.DeviceID == "" {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "device.token.revoke: deviceId is required")
	}
	if _, err := s.o.Pairing.RevokeToken(ctx, p.DeviceID, p.Role); err != nil {
		return nil, pairingErr("device.token.revoke", err)
	}
	s.hold(p.DeviceID, nil)
	what := "every role"
	if p.Role != "" {
		what = "role " + p.Role
	}
	s.record("device.token.revoke", "admin", "device:"+p.DeviceID, c.RemoteIP, true, "token revoked for "+what)
	n := s.o.Gateway.CloseWhere(func(ci gateway.ConnInfo) bool {
		return ci.Principal.Device == p.DeviceID && ci.Principal.Role != gateway.RoleUnpaired && (p.Role == "" || ci.Principal.Role == p.Role)
	}, gateway.CloseUnauthorized, ReasonRevoked)
	s.o.Gateway.BroadcastTo(gateway.Admin, EventDevicesChanged, struct{}{})
	return map[string]any{"deviceId": p.DeviceID, "closed": n}, nil
}

func (s *Service) remove(ctx context.Context, c *gateway.Call) (any, error) {
	var p struct {
		DeviceID string `json:"deviceId"`
	}
	if err := gateway.DecodeParams(c, &p); err != nil {
		return nil, err
	}
	if err := s.o.Pairing.RemoveDevice(ctx, p.DeviceID); err != nil {
		return nil, pairingErr("device.remove", err)
	}
	s.scopeMu.Lock()
	s.setCached(p.DeviceID, "")
	s.scopeMu.Unlock()
	s.hold(p.DeviceID, nil)
	s.mu.Lock()
	var reqs []string
	for id, dev := range s.live {
		if dev == p.DeviceID {
			reqs = append(reqs, id) // RemoveDevice deleted its request too
		}
	}
	s.mu.Unlock()
	for _, id := range reqs {
		s.resolve(id, p.DeviceID, decisionRemoved, nil)
	}
	s.record("device.remove", "admin", "device:"+p.DeviceID, c.RemoteIP, true, "pairing removed")
	n := s.o.Gateway.CloseWhere(deviceConns(p.DeviceID, ""), gateway.CloseUnauthorized, ReasonRemoved)
	s.o.Gateway.BroadcastTo(gateway.Admin, EventDevicesChanged, struct{}{})
	return map[string]any{"deviceId": p.DeviceID, "removed": true, "closed": n}, nil
}
