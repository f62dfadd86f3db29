package pairing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Memory scope of a paired device (issue 21 item 4). A device paired with
// role operator reaches memory, history and chat; its Scope says as whom
// (docs/PROTOCOL.md "Access control", "Devices and pairing"):
//
//   - ScopeAuthenticated (the default): what the memory ACL grants the
//     principal `authenticated`, nothing more — a lost phone is not a copy
//     of everything;
//   - "role:<name>": exactly one existing role, checked and audited as that
//     role (as `as: <name>` does for the person);
//   - ScopeAdmin: everything the person at this computer may do with
//     memory ("everything, like this computer"), only when the person
//     chose it explicitly.
//
// The scope is stored in the device's record; records written before it
// existed get ScopeAuthenticated (the SQL store's migration and
// decodeDevice), never admin.

// Scope is a device's memory scope in its wire form: "authenticated",
// "admin" or "role:<name>".
type Scope string

// The scopes without a role.
const (
	ScopeAuthenticated Scope = "authenticated"
	ScopeAdmin         Scope = "admin"
)

// ScopeRolePrefix starts a role scope: "role:<name>".
const ScopeRolePrefix = "role:"

// MaxScopeRoleBytes bounds the role name of a scope.
const MaxScopeRoleBytes = 128

// ErrBadScope: a scope that is not "authenticated", "admin" or
// "role:<name>" with a name of one path segment.
var ErrBadScope = errors.New("bad device scope")

// RoleScope is the scope acting as role.
func RoleScope(role string) Scope { return Scope(ScopeRolePrefix + role) }

// Role is the role of a role scope, "" for the others.
func (s Scope) Role() string {
	r, ok := strings.CutPrefix(string(s), ScopeRolePrefix)
	if !ok {
		return ""
	}
	return r
}

// ParseScope checks the wire form of a scope ("" is ScopeAuthenticated).
// It checks the shape only: whether the role exists is the caller's
// question (package devices asks the workspace). Errors: ErrBadScope.
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case "", ScopeAuthenticated:
		return ScopeAuthenticated, nil
	case ScopeAdmin:
		return ScopeAdmin, nil
	}
	role, ok := strings.CutPrefix(s, ScopeRolePrefix)
	if !ok {
		return "", fmt.Errorf("%w: %q (want %q, %q or %q<role>)", ErrBadScope, s, ScopeAuthenticated, ScopeAdmin, ScopeRolePrefix)
	}
	if role == "" || len(role) > MaxScopeRoleBytes || role == "." || role == ".." ||
		strings.ContainsAny(role, `/\`) || strings.IndexFunc(role, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", fmt.Errorf("%w: role %q is not a role name", ErrBadScope, role)
	}
	return Scope(s), nil
}

// SetScope changes the paired device's scope. Errors: ErrNotPaired,
// ErrBadScope, the store's.
func (s *Service) SetScope(ctx context.Context, id string, scope Scope) (Device, error) {
	if _, err := ParseScope(string(scope)); err != nil {
		return Device{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.device(ctx, id)
	if err != nil {
		return Device{}, err
	}
	d.Scope = scope
	if err := s.o.Store.PutDevice(ctx, d); err != nil {
		return Device{}, fmt.Errorf("store paired device: %w", err)
	}
	return d, nil
}

// withScope is d with ScopeAuthenticated when it has none (a record from
// before scopes in a Store that was not migrated).
func withScope(d Device) Device {
	if d.Scope == "" {
		d.Scope = ScopeAuthenticated
	}
	return d
}

// migrateScopes gives every paired device stored without a scope (records
// from before issue 21) the safe default, ScopeAuthenticated: until then a
// paired operator device acted as admin. Idempotent; run at every open.
func migrateScopes(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `UPDATE pairing_devices SET body = json_set(body, '$.scope', ?)
		WHERE coalesce(json_extract(body, '$.scope'), '') = ''`, string(ScopeAuthenticated))
	if err != nil {
		return fmt.Errorf("give paired devices the default scope: %w", err)
	}
	return nil
}
