package pairing_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/pairing"
	"github.com/atrium-dev/atrium/backend/statedb"
)

func submit(t *testing.T, s *pairing.Service, dev string) pairing.Request {
	t.Helper()
	r, err := s.Submit(ctx, pairing.Request{DeviceID: dev, Algorithm: "ed25519", PublicKey: "pk-" + dev, DisplayName: "Pixel 8",
		Platform: "android", Roles: []string{"operator", "node"}, Commands: []string{"location.get", "system.notify"}, Caps: []string{"location"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestApproveAndTokens: approval pairs the device with a subset of what it
// asked, issues one 32-byte base64url token per role, and the tokens
// admit exactly their device and role.
func TestApproveAndTokens(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		c := newClock()
		s := service(t, newStore(), c)
		r := submit(t, s, "dev1")
		if _, _, err := s.Approve(ctx, r.ID, []string{"admin"}, nil, ""); !errors.Is(err, pairing.ErrNotRequested) {
			t.Fatalf("approve a role not asked for: %v", err)
		}
		if _, _, err := s.Approve(ctx, r.ID, nil, []string{"system.run"}, ""); !errors.Is(err, pairing.ErrNotRequested) {
			t.Fatalf("approve a command not asked for: %v", err)
		}
		if _, _, err := s.Approve(ctx, r.ID, []string{}, nil, ""); !errors.Is(err, pairing.ErrBadRequest) {
			t.Fatalf("approve no role: %v", err)
		}
		c.Add(time.Minute)
		d, toks, err := s.Approve(ctx, r.ID, nil, []string{"location.get"}, "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d.Roles, []string{"operator", "node"}) || !slices.Equal(d.Commands, []string{"location.get"}) ||
			d.DisplayName != "Pixel 8" || !d.CreatedAt.Equal(c.Now()) || len(toks) != 2 {
			t.Fatalf("device %+v tokens %d", d, len(toks))
		}
		for role, tok := range toks {
			raw, err := base64.RawURLEncoding.DecodeString(tok)
			if err != nil || len(raw) != pairing.TokenBytes {
				t.Fatalf("%s token %q: %v", role, tok, err)
			}
		}
		if p, _ := s.Pending(ctx); len(p) != 0 {
			t.Fatalf("request still pending after approval: %+v", p)
		}
		c.Add(time.Minute)
		got, err := s.CheckToken(ctx, "dev1", "node", toks["node"])
		if err != nil || !got.LastSeenAt.Equal(c.Now()) {
			t.Fatalf("check node token: %+v %v", got, err)
		}
		for _, tc := range []struct{ dev, role, tok string }{
			{"dev1", "operator", toks["node"]}, // another role's token
			{"dev1", "node", ""},
			{"dev1", "node", toks["node"] + "x"},
		} {
			if _, err := s.CheckToken(ctx, tc.dev, tc.role, tc.tok); !errors.Is(err, pairing.ErrTokenMismatch) {
				t.Errorf("check %+v: %v, want ErrTokenMismatch", tc, err)
			}
		}
		if _, err := s.CheckToken(ctx, "dev2", "node", toks["node"]); !errors.Is(err, pairing.ErrNotPaired) {
			t.Errorf("another device with this token: %v, want ErrNotPaired", err)
		}
		// A second approval (a repair) keeps CreatedAt and replaces the tokens.
		r2 := submit(t, s, "dev1")
		created := got.CreatedAt
		c.Add(time.Minute)
		d2, toks2, err := s.Approve(ctx, r2.ID, []string{"node"}, nil, "")
		if err != nil || !d2.CreatedAt.Equal(created) || !slices.Equal(d2.Roles, []string{"node"}) || len(d2.Tokens) != 1 {
			t.Fatalf("repair approval: %+v %v", d2, err)
		}
		if _, err := s.CheckToken(ctx, "dev1", "node", toks["node"]); !errors.Is(err, pairing.ErrTokenMismatch) {
			t.Errorf("old token after re-approval: %v", err)
		}
		if _, err := s.CheckToken(ctx, "dev1", "operator", toks["operator"]); !errors.Is(err, pairing.ErrTokenMismatch) {
			t.Errorf("token of a role no longer approved: %v", err)
		}
		if _, err := s.CheckToken(ctx, "dev1", "node", toks2["node"]); err != nil {
			t.Errorf("new token: %v", err)
		}
	})
}

// TestTokenMismatchKeepsRecord: no wrong, stale or revoked token changes
// or deletes the pairing record; rotate and revoke act on their role
// only; RemoveDevice is the one way a record goes.
func TestTokenMismatchKeepsRecord(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		c := newClock()
		s := service(t, newStore(), c)
		_, toks, err := s.Approve(ctx, submit(t, s, "dev1").ID, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		before, err := s.Device(ctx, "dev1")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			c.Add(time.Second)
			if _, err := s.CheckToken(ctx, "dev1", "node", "wrong-"+string(rune('a'+i))); !errors.Is(err, pairing.ErrTokenMismatch) {
				t.Fatalf("wrong token: %v", err)
			}
		}
		after, err := s.Device(ctx, "dev1")
		if err != nil || !reflect.DeepEqual(before, after) {
			t.Fatalf("record changed by mismatches:\n%+v\n%+v (%v)", before, after, err)
		}

		newTok, err := s.RotateToken(ctx, "dev1", "node")
		if err != nil || newTok == toks["node"] {
			t.Fatalf("rotate: %q %v", newTok, err)
		}
		if _, err := s.CheckToken(ctx, "dev1", "node", toks["node"]); !errors.Is(err, pairing.ErrTokenMismatch) {
			t.Errorf("rotated-out token: %v", err)
		}
		if _, err := s.CheckToken(ctx, "dev1", "operator", toks["operator"]); err != nil {
			t.Errorf("other role's token after rotating node: %v", err)
		}
		if _, err := s.RotateToken(ctx, "dev1", "admin"); !errors.Is(err, pairing.ErrNotRequested) {
			t.Errorf("rotate a role not approved: %v", err)
		}
		if _, err := s.RevokeToken(ctx, "dev1", "node"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CheckToken(ctx, "dev1", "node", newTok); !errors.Is(err, pairing.ErrTokenMismatch) {
			t.Errorf("revoked token: %v", err)
		}
		if _, err := s.CheckToken(ctx, "dev1", "operator", toks["operator"]); err != nil {
			t.Errorf("operator token after revoking node: %v", err)
		}
		if _, err := s.RevokeToken(ctx, "dev1", ""); err != nil {
			t.Fatal(err)
		}
		d, err := s.Device(ctx, "dev1")
		if err != nil || d.Tokens["operator"].Hash != "" || d.Tokens["operator"].RevokedAt.IsZero() || !slices.Equal(d.Roles, []string{"operator", "node"}) {
			t.Fatalf("after revoking all: %+v %v (the record must stay)", d, err)
		}
		if err := s.RemoveDevice(ctx, "dev1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Device(ctx, "dev1"); !errors.Is(err, pairing.ErrNotPaired) {
			t.Fatalf("after remove: %v", err)
		}
		if err := s.RemoveDevice(ctx, "dev1"); !errors.Is(err, pairing.ErrNotPaired) {
			t.Fatalf("remove twice: %v", err)
		}
	})
}

// TestDevicesSurviveRestartOnlyHashes: paired devices are in state.db
// after a reopen, and state.db holds no token, only hashes.
func TestDevicesSurviveRestartOnlyHashes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() (*pairing.Service, func()) {
		db, err := statedb.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := pairing.OpenSQLStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		return service(t, st, newClock()), func() { db.Close() }
	}
	s, closeDB := open()
	_, toks, err := s.Approve(ctx, submit(t, s, "dev1").ID, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	rot, err := s.RotateToken(ctx, "dev1", "operator")
	if err != nil {
		t.Fatal(err)
	}
	closeDB()
	raw := []byte{}
	for _, f := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(f)
		raw = append(raw, b...)
	}
	for _, tok := range []string{toks["operator"], toks["node"], rot} {
		if bytes.Contains(raw, []byte(tok)) {
			t.Fatal("a device token itself is in state.db")
		}
	}
	s, closeDB = open()
	defer closeDB()
	ds, err := s.Devices(ctx)
	if err != nil || len(ds) != 1 || ds[0].DeviceID != "dev1" {
		t.Fatalf("devices after reopen: %+v %v", ds, err)
	}
	if _, err := s.CheckToken(ctx, "dev1", "node", toks["node"]); err != nil {
		t.Errorf("node token after reopen: %v", err)
	}
	if _, err := s.CheckToken(ctx, "dev1", "operator", rot); err != nil {
		t.Errorf("rotated operator token after reopen: %v", err)
	}
}
