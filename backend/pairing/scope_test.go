package pairing_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/atrium-dev/atrium/backend/pairing"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// TestScopeApproveAndSet: an approval without a scope gives
// "authenticated" (a repair too: never a wider scope by default), an
// approval may choose a role or admin, SetScope changes it, and malformed
// scopes are ErrBadScope with the record untouched.
func TestScopeApproveAndSet(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		s := service(t, newStore(), newClock())
		if _, _, err := s.Approve(ctx, submit(t, s, "dev1").ID, nil, nil, "role:"); !errors.Is(err, pairing.ErrBadScope) {
			t.Fatalf("approve with scope role: (no name): %v", err)
		}
		d, _, err := s.Approve(ctx, submit(t, s, "dev1").ID, nil, nil, "")
		if err != nil || d.Scope != pairing.ScopeAuthenticated {
			t.Fatalf("default scope: %q %v", d.Scope, err)
		}
		if d, err = s.SetScope(ctx, "dev1", pairing.RoleScope("writer")); err != nil || d.Scope != "role:writer" || d.Scope.Role() != "writer" {
			t.Fatalf("set role scope: %+v %v", d, err)
		}
		for _, bad := range []pairing.Scope{"everything", "role:a/b", "role:..", "role:a b", "Admin", "role:x\n"} {
			if _, err := s.SetScope(ctx, "dev1", bad); !errors.Is(err, pairing.ErrBadScope) {
				t.Errorf("set %q: %v, want ErrBadScope", bad, err)
			}
		}
		if got, _ := s.Device(ctx, "dev1"); got.Scope != "role:writer" {
			t.Fatalf("a refused scope changed the record: %q", got.Scope)
		}
		if _, err := s.SetScope(ctx, "nobody", pairing.ScopeAdmin); !errors.Is(err, pairing.ErrNotPaired) {
			t.Errorf("set scope of an unknown device: %v", err)
		}
		if d, _, err = s.Approve(ctx, submit(t, s, "dev1").ID, nil, nil, ""); err != nil || d.Scope != pairing.ScopeAuthenticated {
			t.Fatalf("a repair approved without a scope: %q %v, want authenticated", d.Scope, err)
		}
		if d, _, err = s.Approve(ctx, submit(t, s, "dev1").ID, nil, nil, pairing.ScopeAdmin); err != nil || d.Scope != pairing.ScopeAdmin {
			t.Fatalf("approve as admin: %q %v", d.Scope, err)
		}
		ds, err := s.Devices(ctx)
		if err != nil || len(ds) != 1 || ds[0].Scope != pairing.ScopeAdmin {
			t.Fatalf("devices: %+v %v", ds, err)
		}
	})
}

// TestScopeMigration: a device paired before scopes (its record has no
// scope; it acted as admin) is authenticated once state.db is opened, in
// the stored row itself, and a scope chosen later survives a reopen.
func TestScopeMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := statedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The table and a row exactly as the store wrote them before issue 21.
	if _, err := db.Exec(`CREATE TABLE pairing_devices (device_id TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, body TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	old := `{"deviceId":"old1","algorithm":"ed25519","publicKey":"pk","displayName":"Pixel 7","platform":"android",` +
		`"roles":["operator"],"commands":[],"caps":[],"createdAt":"2026-01-01T00:00:00Z","lastSeenAt":"2026-01-02T00:00:00Z",` +
		`"tokens":{"operator":{"hash":"ab","issuedAt":"2026-01-01T00:00:00Z","revokedAt":"0001-01-01T00:00:00Z"}}}`
	if _, err := db.Exec(`INSERT INTO pairing_devices VALUES ('old1', 1, ?)`, old); err != nil {
		t.Fatal(err)
	}
	st, err := pairing.OpenSQLStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := db.QueryRow(`SELECT json_extract(body, '$.scope') FROM pairing_devices WHERE device_id = 'old1'`).Scan(&stored); err != nil || stored != "authenticated" {
		t.Fatalf("migrated row's scope %q %v, want authenticated", stored, err)
	}
	s := service(t, st, newClock())
	d, err := s.Device(ctx, "old1")
	if err != nil || d.Scope != pairing.ScopeAuthenticated || d.DisplayName != "Pixel 7" || d.Tokens["operator"].Hash != "ab" {
		t.Fatalf("old device after the migration: %+v %v", d, err)
	}
	if _, err := s.SetScope(ctx, "old1", pairing.ScopeAdmin); err != nil {
		t.Fatal(err)
	}
	// Reopening runs the migration again: a chosen scope stays.
	st, err = pairing.OpenSQLStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := service(t, st, newClock()).Device(ctx, "old1"); err != nil || d.Scope != pairing.ScopeAdmin {
		t.Fatalf("chosen scope after reopen: %q %v", d.Scope, err)
	}
}
