package pairing_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/pairing"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// clock is an injected clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

var ctx = context.Background()

// stores runs f against the in-memory store and the state.db one.
func stores(t *testing.T, f func(t *testing.T, newStore func() pairing.Store)) {
	t.Run("mem", func(t *testing.T) { f(t, func() pairing.Store { return pairing.NewMemStore() }) })
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		f(t, func() pairing.Store {
			db, err := statedb.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			s, err := pairing.OpenSQLStore(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func service(t *testing.T, st pairing.Store, c *clock) *pairing.Service {
	t.Helper()
	s, err := pairing.New(pairing.Options{Store: st, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)} }

var (
	codeRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$`)
	idRE   = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// newCode issues a code and returns it ("XXXX-XXXX").
func newCode(t *testing.T, s *pairing.Service) string {
	t.Helper()
	is, err := s.NewCode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return is.Code
}

// redeem is Redeem's error alone.
func redeem(s *pairing.Service, code, device, ip string) error {
	_, err := s.Redeem(ctx, code, device, ip)
	return err
}

func TestCodeFormatAndOnlyHashStored(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		c := newClock()
		s := service(t, newStore(), c)
		seen := map[string]bool{}
		for range 20 {
			is, err := s.NewCode(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !codeRE.MatchString(is.Code) || seen[is.Code] || !idRE.MatchString(is.ID) || seen[is.ID] || is.MaxWrongTries != pairing.DefaultMaxWrongTries {
				t.Fatalf("code %+v (seen before: %v)", is, seen[is.Code] || seen[is.ID])
			}
			seen[is.Code], seen[is.ID] = true, true
			if !is.ExpiresAt.Equal(c.Now().Add(10 * time.Minute)) {
				t.Fatalf("expires %v", is.ExpiresAt)
			}
		}
	})
	// state.db never holds a code, only its hash.
	path := filepath.Join(t.TempDir(), "state.db")
	db, _ := statedb.Open(path)
	st, _ := pairing.OpenSQLStore(ctx, db)
	s := service(t, st, newClock())
	code := newCode(t, s)
	db.Close()
	raw := []byte{}
	for _, f := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(f)
		raw = append(raw, b...)
	}
	norm, _ := pairing.NormalizeCode(code)
	if bytes.Contains(raw, []byte(norm)) || bytes.Contains(raw, []byte(code)) {
		t.Fatal("the setup code itself is in state.db")
	}
}

func TestNormalizeCode(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"ABCD-EFGH", "ABCDEFGH", true},
		{" abcd efgh ", "ABCDEFGH", true},
		{"0123-4567", "01234567", true},
		{"oIlo-89ab", "011089AB", true},
		{"ABCD-EFG", "", false},
		{"ABCD-EFGHJ", "", false},
		{"ABCD-EFGU", "", false}, // U is not in the alphabet
		{"ABCD_EFGH", "", false},
		{"ＡＢＣＤ-ＥＦＧＨ", "", false}, // full-width letters are not folded
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := pairing.NormalizeCode(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("NormalizeCode(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestRedeem(t *testing.T) {
	type step struct {
		after  time.Duration // clock moves this much before the step
		code   string        // "" = the issued code; "typed" = as a person types it
		device string
		ip     string
		err    error
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"first use", []step{{0, "", "devA", "10.0.0.1", nil}}},
		{"typed loosely", []step{{0, "typed", "devA", "10.0.0.1", nil}}},
		{"retry by the same device within a minute", []step{
			{0, "", "devA", "10.0.0.1", nil}, {30 * time.Second, "", "devA", "10.0.0.2", nil}, {29 * time.Second, "", "devA", "10.0.0.1", nil}}},
		{"retry by the same device after a minute", []step{
			{0, "", "devA", "10.0.0.1", nil}, {61 * time.Second, "", "devA", "10.0.0.1", pairing.ErrUsed}}},
		{"another device within the minute", []step{
			{0, "", "devA", "10.0.0.1", nil}, {time.Second, "", "devB", "10.0.0.1", pairing.ErrUsed}}},
		{"used just before expiry, retried just after", []step{
			{9*time.Minute + 50*time.Second, "", "devA", "10.0.0.1", nil}, {20 * time.Second, "", "devA", "10.0.0.1", nil}}},
		{"expired", []step{{10 * time.Minute, "", "devA", "10.0.0.1", pairing.ErrExpired}}},
		{"unknown code", []step{{0, "ZZZZ-ZZZZ", "devA", "10.0.0.1", pairing.ErrInvalidCode}}},
		{"malformed code", []step{{0, "hello", "devA", "10.0.0.1", pairing.ErrInvalidCode}}},
		{"no device id", []step{{0, "", "", "10.0.0.1", pairing.ErrBadRequest}}},
	}
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				clk := newClock()
				s := service(t, newStore(), clk)
				code := newCode(t, s)
				for i, st := range c.steps {
					clk.Add(st.after)
					in := st.code
					switch in {
					case "":
						in = code
					case "typed":
						in = strings.ToLower(strings.ReplaceAll(code, "-", " "))
					}
					if err := redeem(s, in, st.device, st.ip); !errors.Is(err, st.err) || (st.err == nil) != (err == nil) {
						t.Fatalf("step %d: err = %v, want %v", i, err, st.err)
					}
				}
			})
		}
	})
}

// TestRedeemSurvivesRestart: a code issued before a restart of the app is
// redeemable after it, and a used one stays used.
func TestRedeemSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() pairing.Store {
		db, err := statedb.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		st, err := pairing.OpenSQLStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	clk := newClock()
	a := service(t, open(), clk)
	code1, code2 := newCode(t, a), newCode(t, a)
	if err := redeem(a, code2, "devA", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	restarted := service(t, open(), clk)
	clk.Add(2 * time.Minute)
	if err := redeem(restarted, code1, "devA", "10.0.0.1"); err != nil {
		t.Fatalf("code issued before the restart: %v", err)
	}
	if err := redeem(restarted, code2, "devB", "10.0.0.2"); !errors.Is(err, pairing.ErrUsed) {
		t.Fatalf("code used before the restart: %v", err)
	}
}

func TestRedeemConcurrentOneWinner(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		s := service(t, newStore(), newClock())
		code := newCode(t, s)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = redeem(s, code, fmt.Sprintf("dev%d", i), fmt.Sprintf("10.0.1.%d", i)) })
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
			} else if !errors.Is(err, pairing.ErrUsed) {
				t.Fatalf("unexpected error %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d devices redeemed one code", wins)
		}
	})
}

// TestPerAddressLimit: an address (an IPv6 address by its /64) that failed
// PerIPFailures times in the window is refused before its code is looked
// at, even a right one, and told when to come back; its refused tries are
// not counted; other addresses are not affected.
func TestPerAddressLimit(t *testing.T) {
	clk := newClock()
	s := service(t, pairing.NewMemStore(), clk)
	code := newCode(t, s)
	guess := func(ip string) error { return redeem(s, "ZZZZ-ZZZ0", "attacker", ip) }
	for i := range pairing.DefaultPerIPFailures {
		if err := guess("10.0.0.66"); !errors.Is(err, pairing.ErrInvalidCode) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	err := redeem(s, code, "attacker", "10.0.0.66")
	var rl *pairing.RateLimitError
	if !errors.As(err, &rl) || !errors.Is(err, pairing.ErrRateLimited) || rl.RetryAfter <= 0 || rl.RetryAfter > 10*time.Minute {
		t.Fatalf("after %d failures: %v", pairing.DefaultPerIPFailures, err)
	}
	clk.Add(time.Minute)
	for range 3 * pairing.DefaultMaxWrongTries { // refused tries count against no code either
		if err := guess("10.0.0.66"); !errors.Is(err, pairing.ErrRateLimited) {
			t.Fatalf("still blocked: %v", err)
		}
	}
	if err := redeem(s, code, "devA", "10.0.0.7"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	clk.Add(pairing.DefaultFailureWindow - time.Minute) // the first failures leave the window
	if err := guess("10.0.0.66"); !errors.Is(err, pairing.ErrInvalidCode) {
		t.Fatalf("after the window: %v", err)
	}
	// Malformed codes count against the address too.
	for range pairing.DefaultPerIPFailures {
		redeem(s, "hello", "attacker", "10.0.0.67")
	}
	if err := guess("10.0.0.67"); !errors.Is(err, pairing.ErrRateLimited) {
		t.Fatalf("after malformed codes: %v", err)
	}

	// IPv6: one /64 is one address.
	s = service(t, pairing.NewMemStore(), clk)
	for i := range pairing.DefaultPerIPFailures {
		guess(fmt.Sprintf("2001:db8::%x", i+1))
	}
	if err := guess("[2001:db8::ffff]"); !errors.Is(err, pairing.ErrRateLimited) {
		t.Fatalf("same /64: %v", err)
	}
	if err := guess("2001:db8:0:1::1"); !errors.Is(err, pairing.ErrInvalidCode) {
		t.Fatalf("another /64: %v", err)
	}
}

// TestFloodDoesNotBlockAFreshCode (issue 21 item 3): wrong codes from many
// addresses, each up to its own limit, lock the code that was live during
// the flood but never block a fresh code from a new address (on the old
// main, 15 addresses filled a global cap and every code was refused for 10
// minutes).
func TestFloodDoesNotBlockAFreshCode(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		clk := newClock()
		s := service(t, newStore(), clk)
		during := newCode(t, s)
		var locked []string
		for a := range 20 {
			for g := range pairing.DefaultPerIPFailures {
				r, err := s.Redeem(ctx, fmt.Sprintf("ZZZZ-%04d", a*10+g), "attacker", fmt.Sprintf("10.9.%d.%d", a/200, a%200+1))
				if !errors.Is(err, pairing.ErrInvalidCode) {
					t.Fatalf("address %d guess %d: %v", a, g, err)
				}
				locked = append(locked, r.Locked...)
			}
		}
		if len(locked) != 1 {
			t.Fatalf("the flood locked %v, want the one live code once", locked)
		}
		var le *pairing.LockedError
		if err := redeem(s, during, "devA", "192.168.1.5"); !errors.As(err, &le) || le.WrongTries != pairing.DefaultMaxWrongTries {
			t.Fatalf("the code live during the flood: %v, want locked after %d", err, pairing.DefaultMaxWrongTries)
		}
		fresh := newCode(t, s)
		r, err := s.Redeem(ctx, fresh, "devB", "192.168.1.6")
		if err != nil || r.CodeID == "" {
			t.Fatalf("a fresh code from a new address after the flood: %+v %v", r, err)
		}
	})
}

// TestCodeLocksAfterWrongTries: every failed try of a well-formed code is
// a wrong try against every live code; the MaxWrongTries-th locks it (named
// once in Redemption.Locked), after which even the right code is refused
// from any address, also after a restart; codes issued later, used codes
// and malformed tries are not counted.
func TestCodeLocksAfterWrongTries(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		clk := newClock()
		st := newStore()
		s := service(t, st, clk)
		spare, used := newCode(t, s), newCode(t, s)
		if err := redeem(s, used, "devU", "10.5.0.1"); err != nil {
			t.Fatal(err)
		}
		is, err := s.NewCode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ip := func(i int) string { return fmt.Sprintf("10.0.%d.1", i/pairing.DefaultPerIPFailures) } // each address up to its limit
		for range 2 * pairing.DefaultPerIPFailures {
			redeem(s, "not a code!", "attacker", "10.1.0.1") // malformed: names no code
		}
		for i := range pairing.DefaultMaxWrongTries - 1 {
			if r, err := s.Redeem(ctx, used, "attacker", ip(i)); !errors.Is(err, pairing.ErrUsed) || len(r.Locked) != 0 {
				t.Fatalf("a used code's value: %+v %v", r, err) // a dead code: counts against nothing
			}
			if r, err := s.Redeem(ctx, "ZZZZ-ZZZZ", "attacker", ip(i)); err == nil || len(r.Locked) != 0 {
				t.Fatalf("wrong try %d: %+v %v", i+1, r, err)
			}
		}
		r, err := s.Redeem(ctx, "ZZZZ-ZZZZ", "attacker", ip(pairing.DefaultMaxWrongTries-1))
		if !errors.Is(err, pairing.ErrInvalidCode) || len(r.Locked) != 2 || !slices.Contains(r.Locked, is.ID) {
			t.Fatalf("the %dth wrong try: %+v %v, want both live codes locked", pairing.DefaultMaxWrongTries, r, err)
		}
		if r, err := s.Redeem(ctx, "ZZZZ-ZZZZ", "attacker", "10.2.0.1"); len(r.Locked) != 0 || err == nil {
			t.Fatalf("a try after the lock: %+v %v (a locked code is named once)", r, err)
		}
		var le *pairing.LockedError
		for _, from := range []string{"192.168.1.5", "192.168.1.6"} {
			if err := redeem(s, is.Code, "devA", from); !errors.As(err, &le) || !errors.Is(err, pairing.ErrLocked) || le.WrongTries != pairing.DefaultMaxWrongTries {
				t.Fatalf("the right code after the lock, from %s: %v", from, err)
			}
		}
		if err := redeem(s, spare, "devS", "192.168.1.7"); !errors.Is(err, pairing.ErrLocked) {
			t.Fatalf("the other live code: %v", err)
		}
		if err := redeem(s, used, "devU", "10.5.0.1"); err != nil {
			t.Fatalf("the used code's retry by its device: %v (used codes are not counted)", err)
		}
		later := newCode(t, s)
		again := service(t, st, clk) // a restart keeps the lock
		if err := redeem(again, is.Code, "devA", "192.168.1.8"); !errors.Is(err, pairing.ErrLocked) {
			t.Fatalf("after a restart: %v", err)
		}
		for i := range pairing.DefaultMaxWrongTries - 2 { // the try above counted against it
			redeem(again, "ZZZZ-ZZZZ", "attacker", fmt.Sprintf("10.3.%d.1", i))
		}
		if err := redeem(again, later, "devL", "192.168.1.9"); err != nil {
			t.Fatalf("a code issued after the lock, %d wrong tries later: %v", pairing.DefaultMaxWrongTries-1, err)
		}
	})
}

// TestDeadCodeRetriesCountAgainstNothing (issue 21 review item 5): the
// person's phone asking again with a code that is locked, used or expired
// is refused as such, and neither charges the person's fresh code nor
// rate-limits the phone's address, however often it asks.
func TestDeadCodeRetriesCountAgainstNothing(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		clk := newClock()
		s := service(t, newStore(), clk)
		lockedCode := newCode(t, s)
		for i := range pairing.DefaultMaxWrongTries { // the attack that locks it
			redeem(s, "ZZZZ-ZZZZ", "attacker", fmt.Sprintf("10.7.%d.1", i))
		}
		if err := redeem(s, lockedCode, "phone", "192.168.1.5"); !errors.Is(err, pairing.ErrLocked) {
			t.Fatalf("the locked code: %v", err)
		}
		used := newCode(t, s)
		if err := redeem(s, used, "other", "192.168.1.9"); err != nil {
			t.Fatal(err)
		}
		expiring := newCode(t, s)
		clk.Add(pairing.DefaultCodeTTL + time.Second)
		fresh := newCode(t, s)
		for i := range 5 * pairing.DefaultMaxWrongTries {
			for _, c := range []struct {
				code string
				want error
			}{{lockedCode, pairing.ErrLocked}, {used, pairing.ErrUsed}, {expiring, pairing.ErrExpired}} {
				r, err := s.Redeem(ctx, c.code, "phone", "192.168.1.5")
				if !errors.Is(err, c.want) || len(r.Locked) != 0 {
					t.Fatalf("ask %d with a dead code: %+v %v, want %v", i+1, r, err, c.want)
				}
			}
		}
		// The fresh code still has all its tries: MaxWrongTries−1 guesses
		// leave it live, and the phone's address may still use it.
		for i := range pairing.DefaultMaxWrongTries - 1 {
			redeem(s, "ZZZZ-ZZZZ", "attacker", fmt.Sprintf("10.8.%d.1", i))
		}
		if err := redeem(s, fresh, "phone", "192.168.1.5"); err != nil {
			t.Fatalf("the fresh code from the phone's address: %v", err)
		}
	})
}

// TestOldCodesTableMigrates: a pairing_codes table from before code ids
// and locking gets the new columns; its codes still redeem.
func TestOldCodesTableMigrates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := statedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk := newClock()
	norm := "0123ABCD"
	sum := sha256.Sum256([]byte(norm))
	if _, err := db.ExecContext(ctx, `CREATE TABLE pairing_codes (
		hash TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,
		used_by TEXT NOT NULL DEFAULT '', used_ms INTEGER NOT NULL DEFAULT 0);
		INSERT INTO pairing_codes (hash, created_ms, expires_ms) VALUES (?, ?, ?)`,
		hex.EncodeToString(sum[:]), clk.Now().UnixMilli(), clk.Now().Add(time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second open finds the columns there
		st, err := pairing.OpenSQLStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if cs, err := st.Codes(ctx); err != nil || len(cs) != 1 || cs[0].WrongTries != 0 || !cs[0].LockedAt.IsZero() {
			t.Fatalf("codes after the migration: %+v %v", cs, err)
		}
	}
	st, _ := pairing.OpenSQLStore(ctx, db)
	if err := redeem(service(t, st, clk), norm, "devA", "10.0.0.1"); err != nil {
		t.Fatalf("a code stored before the migration: %v", err)
	}
}

func TestPendingRequests(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		clk := newClock()
		st := newStore()
		s := service(t, st, clk)
		r1, err := s.Submit(ctx, pairing.Request{DeviceID: "devA", DisplayName: "phone", Roles: []string{"operator"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r1.ID) != 32 || !r1.ExpiresAt.Equal(clk.Now().Add(5*time.Minute)) {
			t.Fatalf("request %+v", r1)
		}
		clk.Add(time.Minute)
		// Asking for more while pending: refused, the request unchanged
		// (the person approves by id what they were shown).
		if _, err := s.Submit(ctx, pairing.Request{DeviceID: "devA", DisplayName: "phone", Roles: []string{"operator", "node"}}); !errors.Is(err, pairing.ErrWidened) {
			t.Fatalf("widening resubmit: %v, want ErrWidened", err)
		}
		// A second socket from the same device: the same request, refreshed.
		r1b, err := s.Submit(ctx, pairing.Request{DeviceID: "devA", DisplayName: "phone 2", Roles: []string{"operator"}})
		if err != nil {
			t.Fatal(err)
		}
		if r1b.ID != r1.ID || !r1b.CreatedAt.Equal(r1.CreatedAt) || !r1b.ExpiresAt.Equal(clk.Now().Add(5*time.Minute)) {
			t.Fatalf("resubmit %+v, first %+v", r1b, r1)
		}
		clk.Add(time.Second)
		r2, _ := s.Submit(ctx, pairing.Request{DeviceID: "devB"})
		list, err := s.Pending(ctx)
		if err != nil || len(list) != 2 || list[0].ID != r1.ID || list[1].ID != r2.ID || list[0].DisplayName != "phone 2" || len(list[0].Roles) != 1 {
			t.Fatalf("pending %+v, %v", list, err)
		}
		if _, err := s.Submit(ctx, pairing.Request{}); !errors.Is(err, pairing.ErrBadRequest) {
			t.Fatalf("no device id: %v", err)
		}
		got, err := s.Take(ctx, r2.ID)
		if err != nil || got.DeviceID != "devB" {
			t.Fatalf("take: %+v %v", got, err)
		}
		if _, err := s.Take(ctx, r2.ID); !errors.Is(err, pairing.ErrNotFound) {
			t.Fatalf("take twice: %v", err)
		}
		// devA's request expires 5 minutes after its last submit.
		clk.Add(5 * time.Minute)
		if _, err := s.Take(ctx, r1.ID); !errors.Is(err, pairing.ErrExpired) {
			t.Fatalf("take expired: %v", err)
		}
		r3, _ := s.Submit(ctx, pairing.Request{DeviceID: "devC"})
		clk.Add(5 * time.Minute)
		if list, _ := s.Pending(ctx); len(list) != 0 {
			t.Fatalf("expired requests still pending: %+v", list)
		}
		if all, _ := st.Requests(ctx); len(all) != 0 {
			t.Fatalf("expired requests still stored: %+v (r3 %s)", all, r3.ID)
		}
	})
}

func TestTooManyPending(t *testing.T) {
	s, _ := pairing.New(pairing.Options{Store: pairing.NewMemStore(), Now: newClock().Now, MaxPending: 3})
	for i := range 3 {
		if _, err := s.Submit(ctx, pairing.Request{DeviceID: fmt.Sprint("dev", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Submit(ctx, pairing.Request{DeviceID: "dev9"}); !errors.Is(err, pairing.ErrTooManyPending) {
		t.Fatalf("4th request: %v", err)
	}
	if _, err := s.Submit(ctx, pairing.Request{DeviceID: "dev1"}); err != nil {
		t.Fatalf("a waiting device resubmitting: %v", err)
	}
}
