package pairing_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

var codeRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$`)

func TestCodeFormatAndOnlyHashStored(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		c := newClock()
		s := service(t, newStore(), c)
		seen := map[string]bool{}
		for range 20 {
			code, exp, err := s.NewCode(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !codeRE.MatchString(code) || seen[code] {
				t.Fatalf("code %q (seen before: %v)", code, seen[code])
			}
			seen[code] = true
			if !exp.Equal(c.Now().Add(10 * time.Minute)) {
				t.Fatalf("expires %v", exp)
			}
		}
	})
	// state.db never holds a code, only its hash.
	path := filepath.Join(t.TempDir(), "state.db")
	db, _ := statedb.Open(path)
	st, _ := pairing.OpenSQLStore(ctx, db)
	s := service(t, st, newClock())
	code, _, _ := s.NewCode(ctx)
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
				code, _, err := s.NewCode(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i, st := range c.steps {
					clk.Add(st.after)
					in := st.code
					switch in {
					case "":
						in = code
					case "typed":
						in = strings.ToLower(strings.ReplaceAll(code, "-", " "))
					}
					if err := s.Redeem(ctx, in, st.device, st.ip); !errors.Is(err, st.err) || (st.err == nil) != (err == nil) {
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
	code1, _, _ := a.NewCode(ctx)
	code2, _, _ := a.NewCode(ctx)
	if err := a.Redeem(ctx, code2, "devA", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	restarted := service(t, open(), clk)
	clk.Add(2 * time.Minute)
	if err := restarted.Redeem(ctx, code1, "devA", "10.0.0.1"); err != nil {
		t.Fatalf("code issued before the restart: %v", err)
	}
	if err := restarted.Redeem(ctx, code2, "devB", "10.0.0.2"); !errors.Is(err, pairing.ErrUsed) {
		t.Fatalf("code used before the restart: %v", err)
	}
}

func TestRedeemConcurrentOneWinner(t *testing.T) {
	stores(t, func(t *testing.T, newStore func() pairing.Store) {
		s := service(t, newStore(), newClock())
		code, _, _ := s.NewCode(ctx)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = s.Redeem(ctx, code, fmt.Sprintf("dev%d", i), fmt.Sprintf("10.0.1.%d", i)) })
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

func TestGuessingIsRateLimited(t *testing.T) {
	clk := newClock()
	s := service(t, pairing.NewMemStore(), clk)
	code, _, _ := s.NewCode(ctx)
	guess := func(ip string) error { return s.Redeem(ctx, "ZZZZ-ZZZ0", "attacker", ip) }
	for i := range pairing.DefaultPerIPFailures {
		if err := guess("10.0.0.66"); !errors.Is(err, pairing.ErrInvalidCode) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	// Blocked now, even with the right code, and told when to come back.
	err := s.Redeem(ctx, code, "attacker", "10.0.0.66")
	var rl *pairing.RateLimitError
	if !errors.As(err, &rl) || !errors.Is(err, pairing.ErrRateLimited) || rl.RetryAfter <= 0 || rl.RetryAfter > 10*time.Minute {
		t.Fatalf("after %d failures: %v", pairing.DefaultPerIPFailures, err)
	}
	// Another address is not affected, and a blocked try is not a new failure.
	clk.Add(time.Minute)
	for range pairing.DefaultPerIPFailures {
		if err := guess("10.0.0.66"); !errors.Is(err, pairing.ErrRateLimited) {
			t.Fatalf("still blocked: %v", err)
		}
	}
	if err := s.Redeem(ctx, code, "devA", "10.0.0.7"); err != nil {
		t.Fatalf("another address: %v", err)
	}
	clk.Add(pairing.DefaultFailureWindow - time.Minute) // the first failures leave the window; the blocked tries were never counted
	if err := guess("10.0.0.66"); !errors.Is(err, pairing.ErrInvalidCode) {
		t.Fatalf("after the window: %v", err)
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

	// Global: many addresses together exhaust the budget for everyone.
	s = service(t, pairing.NewMemStore(), clk)
	code, _, _ = s.NewCode(ctx)
	for i := range pairing.DefaultGlobalFailures {
		if err := guess(fmt.Sprintf("10.1.%d.%d", i/200, i%200)); !errors.Is(err, pairing.ErrInvalidCode) {
			t.Fatalf("distributed guess %d: %v", i, err)
		}
	}
	if err := s.Redeem(ctx, code, "devA", "192.168.1.5"); !errors.Is(err, pairing.ErrRateLimited) {
		t.Fatalf("after the global budget: %v", err)
	}
	clk.Add(pairing.DefaultFailureWindow)
	if err := s.Redeem(ctx, code, "devA", "192.168.1.5"); !errors.Is(err, pairing.ErrExpired) {
		t.Fatalf("after the window the code is checked again (expired by now): %v", err)
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
