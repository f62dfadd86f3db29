package mcpserve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/acl"
)

// TokenPrefix starts every MCP token secret, so that one pasted in the
// wrong place is recognisable (and a scanner can find it).
const TokenPrefix = "atrium_mcp_"

// MaxTokenName is the longest token name, in characters.
const MaxTokenName = 100

// Token errors.
var (
	// ErrBadToken: no token, an unknown or malformed one, or a revoked one.
	ErrBadToken = errors.New("mcpserve: unknown or revoked token")
	// ErrTokenNotFound: no token has that id.
	ErrTokenNotFound = errors.New("mcpserve: no such token")
	// ErrInvalidToken: a token to create has a bad name or role.
	ErrInvalidToken = errors.New("mcpserve: invalid token")
)

// TokenInfo describes one client's token; its secret is never kept (only
// the secret's SHA-256). Times are Unix milliseconds, 0 for never.
type TokenInfo struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	CreatedMs int64  `json:"createdMs"`
	LastUsed  int64  `json:"lastUsedMs"`
	RevokedMs int64  `json:"revokedMs,omitempty"`
}

// TokensOptions configure Tokens.
type TokensOptions struct {
	// Now is the clock (creation, last use, revocation); default time.Now.
	Now func() time.Time
}

// Tokens are the MCP clients' bearer tokens, in state.db table mcp_tokens:
// id, name, role, the SHA-256 (hex) of the secret, creation, last use and
// revocation times. Safe for concurrent use (SQLite serialises writes).
type Tokens struct {
	db  *sql.DB
	now func() time.Time
}

// OpenTokens creates the table if needed. db is state.db (statedb.Open).
func OpenTokens(ctx context.Context, db *sql.DB, o TokensOptions) (*Tokens, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS mcp_tokens (
		id TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,
		created_ms INTEGER NOT NULL, last_used_ms INTEGER NOT NULL DEFAULT 0, revoked_ms INTEGER NOT NULL DEFAULT 0)`); err != nil {
		return nil, fmt.Errorf("create mcp_tokens: %w", err)
	}
	return &Tokens{db: db, now: o.Now}, nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ValidRole checks a token's or a stdio server's role: a valid role name
// (acl.ValidateRole) or Authenticated. Whether the workspace has that role
// is the caller's check (it knows the workspace). Errors wrap
// ErrInvalidToken.
func ValidRole(role string) error {
	if role == Authenticated {
		return nil
	}
	if err := acl.ValidateRole(role); err != nil {
		return fmt.Errorf("%w: role %q: %v", ErrInvalidToken, role, err)
	}
	if role == "admin" {
		return fmt.Errorf("%w: role admin: an MCP client never acts as the person at the desktop", ErrInvalidToken)
	}
	return nil
}

// Create makes a token for a client named name acting as role, and returns
// its secret (shown once: only its hash is stored) with its record.
// Errors: ErrInvalidToken (empty or too long name, bad role), the store's.
func (t *Tokens) Create(ctx context.Context, name, role string) (string, TokenInfo, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > MaxTokenName || !utf8.ValidString(name) {
		return "", TokenInfo{}, fmt.Errorf("%w: a name of 1 to %d characters is required", ErrInvalidToken, MaxTokenName)
	}
	if err := ValidRole(role); err != nil {
		return "", TokenInfo{}, err
	}
	var raw [32]byte
	var id [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", TokenInfo{}, fmt.Errorf("token secret: %w", err)
	}
	if _, err := rand.Read(id[:]); err != nil {
		return "", TokenInfo{}, fmt.Errorf("token id: %w", err)
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	info := TokenInfo{ID: hex.EncodeToString(id[:]), Name: name, Role: role, CreatedMs: t.now().UnixMilli()}
	if _, err := t.db.ExecContext(ctx, `INSERT INTO mcp_tokens (id, name, role, hash, created_ms) VALUES (?, ?, ?, ?, ?)`,
		info.ID, info.Name, info.Role, hashSecret(secret), info.CreatedMs); err != nil {
		return "", TokenInfo{}, fmt.Errorf("store token: %w", err)
	}
	return secret, info, nil
}

// List returns every token, revoked ones included, oldest first.
func (t *Tokens) List(ctx context.Context) ([]TokenInfo, error) {
	rows, err := t.db.QueryContext(ctx, `SELECT id, name, role, created_ms, last_used_ms, revoked_ms FROM mcp_tokens ORDER BY created_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []TokenInfo{}
	for rows.Next() {
		var ti TokenInfo
		if err := rows.Scan(&ti.ID, &ti.Name, &ti.Role, &ti.CreatedMs, &ti.LastUsed, &ti.RevokedMs); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, ti)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// Revoke revokes the token id at once: the next request with it is
// refused (a session opened with it too: every request is checked).
// Revoking a revoked token is not an error. Errors: ErrTokenNotFound.
func (t *Tokens) Revoke(ctx context.Context, id string) (TokenInfo, error) {
	_, err := t.db.ExecContext(ctx, `UPDATE mcp_tokens SET revoked_ms = ? WHERE id = ? AND revoked_ms = 0`, t.now().UnixMilli(), id)
	if err != nil {
		return TokenInfo{}, fmt.Errorf("revoke token: %w", err)
	}
	var ti TokenInfo
	err = t.db.QueryRowContext(ctx, `SELECT id, name, role, created_ms, last_used_ms, revoked_ms FROM mcp_tokens WHERE id = ?`, id).
		Scan(&ti.ID, &ti.Name, &ti.Role, &ti.CreatedMs, &ti.LastUsed, &ti.RevokedMs)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenInfo{}, fmt.Errorf("%w: %q", ErrTokenNotFound, id)
	}
	if err != nil {
		return TokenInfo{}, fmt.Errorf("revoke token: %w", err)
	}
	return ti, nil
}

// Check returns the live token whose secret this is and records its use.
// Errors: ErrBadToken (not a token secret, unknown, revoked), the store's.
func (t *Tokens) Check(ctx context.Context, secret string) (TokenInfo, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 200 {
		return TokenInfo{}, ErrBadToken
	}
	var ti TokenInfo
	err := t.db.QueryRowContext(ctx, `SELECT id, name, role, created_ms, last_used_ms, revoked_ms FROM mcp_tokens WHERE hash = ?`, hashSecret(secret)).
		Scan(&ti.ID, &ti.Name, &ti.Role, &ti.CreatedMs, &ti.LastUsed, &ti.RevokedMs)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return TokenInfo{}, ErrBadToken
	case err != nil:
		return TokenInfo{}, fmt.Errorf("check token: %w", err)
	case ti.RevokedMs != 0:
		return TokenInfo{}, ErrBadToken
	}
	ti.LastUsed = t.now().UnixMilli()
	if _, err := t.db.ExecContext(ctx, `UPDATE mcp_tokens SET last_used_ms = ? WHERE id = ?`, ti.LastUsed, ti.ID); err != nil {
		return TokenInfo{}, fmt.Errorf("record token use: %w", err)
	}
	return ti, nil
}
