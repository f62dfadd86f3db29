package pairing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// Paired devices. Approve turns a pending request into a Device record
// (or updates the record of a known key) and issues one device token per
// approved role: 32 bytes from crypto/rand, base64url without padding (43
// characters). Only the SHA-256 of a token is stored; the plaintext is
// returned once, to be delivered to the device. CheckToken compares in
// constant time. A token that does not match never deletes or changes the
// record (ErrTokenMismatch): the device keeps its pairing and may ask to
// repair. RotateToken replaces a role's token, RevokeToken clears it (the
// record stays), RemoveDevice is the only way a record is deleted.

// TokenBytes is the size of a device token before encoding.
const TokenBytes = 32

// Token is the stored state of one role's device token.
type Token struct {
	Hash      string    `json:"hash,omitempty"` // hex SHA-256 of the token; "" when revoked
	IssuedAt  time.Time `json:"issuedAt"`       // approval or last rotation
	RevokedAt time.Time `json:"revokedAt"`      // zero unless revoked
}

// Device is a paired device's record.
type Device struct {
	DeviceID    string           `json:"deviceId"`    // hex SHA-256 of the public key
	Algorithm   string           `json:"algorithm"`   // "ed25519" or "ecdsa-p256"
	PublicKey   string           `json:"publicKey"`   // base64 raw key
	DisplayName string           `json:"displayName"` // what the device calls itself
	Platform    string           `json:"platform"`    // client.platform
	Roles       []string         `json:"roles"`       // approved roles
	Commands    []string         `json:"commands"`    // approved node commands
	Caps        []string         `json:"caps"`        // declared node capabilities
	CreatedAt   time.Time        `json:"createdAt"`   // first approval
	LastSeenAt  time.Time        `json:"lastSeenAt"`  // last admitted connect or Touch
	Tokens      map[string]Token `json:"tokens"`      // by role
	// Scope is what the device reaches in memory when it connects as an
	// operator (scope.go); never "" in a stored record.
	Scope Scope `json:"scope"`
}

// HasRole reports whether role is approved for d.
func (d Device) HasRole(role string) bool { return slices.Contains(d.Roles, role) }

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

func newToken() (string, error) {
	var b [TokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("device token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// subset returns want when every element is in of (want nil: all of of);
// otherwise ErrNotRequested naming the first that is not.
func subset(what string, want, of []string) ([]string, error) {
	if want == nil {
		return slices.Clone(of), nil
	}
	out := []string{}
	for _, w := range want {
		if !slices.Contains(of, w) {
			return nil, fmt.Errorf("%w: %s %q", ErrNotRequested, what, w)
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out, nil
}

// Approve takes the pending request id and pairs its device with roles
// and commands (each a subset of what it requested; nil means all of them;
// a role list may not be empty) and the memory scope ("" is
// ScopeAuthenticated, also for a repair: an approval never keeps a wider
// scope by default). A known device keeps its CreatedAt. It returns the
// record and the new plaintext tokens by role (the only time they exist).
// Errors: ErrNotFound, ErrExpired, ErrNotRequested (the request stays
// pending), ErrBadRequest (no role), ErrBadScope, the store's.
func (s *Service) Approve(ctx context.Context, id string, roles, commands []string, scope Scope) (Device, map[string]string, error) {
	scope, err := ParseScope(string(scope))
	if err != nil {
		return Device{}, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	r, err := s.find(ctx, id, now)
	if err != nil {
		return Device{}, nil, err
	}
	if roles, err = subset("role", roles, r.Roles); err != nil {
		return Device{}, nil, err
	}
	if len(roles) == 0 {
		return Device{}, nil, fmt.Errorf("%w: approve at least one role", ErrBadRequest)
	}
	if commands, err = subset("command", commands, r.Commands); err != nil {
		return Device{}, nil, err
	}
	if !slices.Contains(roles, "node") {
		commands = []string{}
	}
	d, found, err := s.o.Store.Device(ctx, r.DeviceID)
	if err != nil {
		return Device{}, nil, fmt.Errorf("read paired device: %w", err)
	}
	if !found {
		d = Device{DeviceID: r.DeviceID, CreatedAt: now, Tokens: map[string]Token{}}
	}
	d.Algorithm, d.PublicKey, d.DisplayName, d.Platform = r.Algorithm, r.PublicKey, r.DisplayName, r.Platform
	d.Roles, d.Commands, d.Caps, d.LastSeenAt, d.Scope = roles, commands, slices.Clone(r.Caps), now, scope
	if d.Tokens == nil {
		d.Tokens = map[string]Token{}
	}
	tokens := map[string]string{}
	for role := range d.Tokens {
		if !slices.Contains(roles, role) {
			delete(d.Tokens, role) // a role no longer approved keeps no token
		}
	}
	for _, role := range roles {
		tok, err := newToken()
		if err != nil {
			return Device{}, nil, err
		}
		tokens[role] = tok
		d.Tokens[role] = Token{Hash: hashToken(tok), IssuedAt: now}
	}
	if err := s.o.Store.PutDevice(ctx, d); err != nil {
		return Device{}, nil, fmt.Errorf("store paired device: %w", err)
	}
	if err := s.o.Store.DeleteRequest(ctx, id); err != nil {
		return Device{}, nil, fmt.Errorf("delete pairing request: %w", err)
	}
	return d, tokens, nil
}

// find returns the live request id. Errors: ErrNotFound, ErrExpired (the
// expired request is deleted).
func (s *Service) find(ctx context.Context, id string, now time.Time) (Request, error) {
	all, err := s.o.Store.Requests(ctx)
	if err != nil {
		return Request{}, fmt.Errorf("read pairing requests: %w", err)
	}
	for _, r := range all {
		if r.ID != id {
			continue
		}
		if !now.Before(r.ExpiresAt) {
			if err := s.o.Store.DeleteRequest(ctx, id); err != nil {
				return Request{}, fmt.Errorf("delete pairing request: %w", err)
			}
			return Request{}, ErrExpired
		}
		return r, nil
	}
	return Request{}, ErrNotFound
}

// Device returns the paired device id. Errors: ErrNotPaired, the store's.
func (s *Service) Device(ctx context.Context, id string) (Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.device(ctx, id)
}

func (s *Service) device(ctx context.Context, id string) (Device, error) {
	d, found, err := s.o.Store.Device(ctx, id)
	if err != nil {
		return Device{}, fmt.Errorf("read paired device: %w", err)
	}
	if !found {
		return Device{}, fmt.Errorf("%w: %s", ErrNotPaired, id)
	}
	return withScope(d), nil
}

// Devices lists the paired devices, oldest CreatedAt first.
func (s *Service) Devices(ctx context.Context) ([]Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds, err := s.o.Store.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("read paired devices: %w", err)
	}
	for i := range ds {
		ds[i] = withScope(ds[i])
	}
	return ds, nil
}

// CheckToken admits device id for role when token matches the stored hash
// (constant time), and records LastSeenAt. Errors: ErrNotPaired,
// ErrTokenMismatch (wrong, rotated or revoked token, or a role that is not
// approved; the record is left exactly as it was), the store's.
func (s *Service) CheckToken(ctx context.Context, id, role, token string) (Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.device(ctx, id)
	if err != nil {
		return Device{}, err
	}
	t, ok := d.Tokens[role]
	got, want := hashToken(token), t.Hash
	if !ok || want == "" || !d.HasRole(role) || token == "" ||
		subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return d, ErrTokenMismatch
	}
	d.LastSeenAt = s.o.Now()
	if err := s.o.Store.PutDevice(ctx, d); err != nil {
		return Device{}, fmt.Errorf("store paired device: %w", err)
	}
	return d, nil
}

// Touch sets the device's LastSeenAt to now (e.g. when its connection
// ends). An unknown device is ErrNotPaired.
func (s *Service) Touch(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.device(ctx, id)
	if err != nil {
		return err
	}
	d.LastSeenAt = s.o.Now()
	if err := s.o.Store.PutDevice(ctx, d); err != nil {
		return fmt.Errorf("store paired device: %w", err)
	}
	return nil
}

// RotateToken issues a new token for the device's approved role and
// returns it (the old one stops matching). Errors: ErrNotPaired,
// ErrNotRequested (role not approved), the store's.
func (s *Service) RotateToken(ctx context.Context, id, role string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.device(ctx, id)
	if err != nil {
		return "", err
	}
	if !d.HasRole(role) {
		return "", fmt.Errorf("%w: role %q is not approved for this device", ErrNotRequested, role)
	}
	tok, err := newToken()
	if err != nil {
		return "", err
	}
	d.Tokens[role] = Token{Hash: hashToken(tok), IssuedAt: s.o.Now()}
	if err := s.o.Store.PutDevice(ctx, d); err != nil {
		return "", fmt.Errorf("store paired device: %w", err)
	}
	return tok, nil
}

// RevokeToken clears the device's token for role ("" = every role); the
// record stays, so the device can ask to repair. Errors: ErrNotPaired,
// ErrNotRequested (role not approved), the store's.
func (s *Service) RevokeToken(ctx context.Context, id, role string) (Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.device(ctx, id)
	if err != nil {
		return Device{}, err
	}
	if role != "" && !d.HasRole(role) {
		return Device{}, fmt.Errorf("%w: role %q is not approved for this device", ErrNotRequested, role)
	}
	now := s.o.Now()
	for _, r := range d.Roles {
		if role == "" || r == role {
			d.Tokens[r] = Token{IssuedAt: d.Tokens[r].IssuedAt, RevokedAt: now}
		}
	}
	if err := s.o.Store.PutDevice(ctx, d); err != nil {
		return Device{}, fmt.Errorf("store paired device: %w", err)
	}
	return d, nil
}

// RemoveDevice deletes the pairing record (and the device's pending
// request, if any). Errors: ErrNotPaired, the store's.
func (s *Service) RemoveDevice(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.device(ctx, id); err != nil {
		return err
	}
	if err := s.o.Store.DeleteDevice(ctx, id); err != nil {
		return fmt.Errorf("delete paired device: %w", err)
	}
	all, err := s.o.Store.Requests(ctx)
	if err != nil {
		return fmt.Errorf("read pairing requests: %w", err)
	}
	for _, r := range all {
		if r.DeviceID == id {
			if err := s.o.Store.DeleteRequest(ctx, r.ID); err != nil {
				return fmt.Errorf("delete pairing request: %w", err)
			}
		}
	}
	return nil
}
