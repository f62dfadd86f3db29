package versions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/statedb"
)

func TestCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want Order
	}{
		{"", "", Equal},
		{"a=1", "a=1", Equal},
		{"a=1,b=2", "b=2,a=1", Equal},
		{"", "a=1", Before},
		{"a=1", "a=2", Before},
		{"a=1", "a=1,b=1", Before},
		{"a=2", "a=1", After},
		{"a=1,b=1", "a=1", After},
		{"a=1", "", After},
		{"a=1", "b=1", Concurrent},
		{"a=2,b=1", "a=1,b=2", Concurrent},
		{"admin=1,main=3", "admin=2,main=2", Concurrent},
	}
	for _, c := range cases {
		a, err := Parse(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Parse(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := Compare(a, b); got != c.want {
			t.Errorf("Compare(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		// Compare is antisymmetric.
		rev := map[Order]Order{Equal: Equal, Before: After, After: Before, Concurrent: Concurrent}[c.want]
		if got := Compare(b, a); got != rev {
			t.Errorf("Compare(%q, %q) = %v, want %v", c.b, c.a, got, rev)
		}
	}
}

func TestMergeAndInc(t *testing.T) {
	cases := []struct {
		a, b, merged string
	}{
		{"", "", ""},
		{"a=1", "", "a=1"},
		{"a=1", "b=2", "a=1,b=2"},
		{"a=3,b=1", "a=1,b=2", "a=3,b=2"},
		{"写手=2", "admin=1", "admin=1,写手=2"},
	}
	for _, c := range cases {
		a, _ := Parse(c.a)
		b, _ := Parse(c.b)
		m := Merge(a, b)
		if m.String() != c.merged {
			t.Errorf("Merge(%q, %q) = %q, want %q", c.a, c.b, m, c.merged)
		}
		if o := Compare(m, a); o != After && o != Equal {
			t.Errorf("Merge(%q, %q) does not descend from a: %v", c.a, c.b, o)
		}
		if o := Compare(m, b); o != After && o != Equal {
			t.Errorf("Merge(%q, %q) does not descend from b: %v", c.a, c.b, o)
		}
		n := m.Inc("admin")
		if Compare(n, m) != After || n["admin"] != m["admin"]+1 {
			t.Errorf("Inc of %q = %q", m, n)
		}
		if m.String() != c.merged {
			t.Errorf("Inc changed its receiver: %q", m)
		}
	}
}

func TestWireForm(t *testing.T) {
	cases := []struct {
		in, canon string
		err       bool
	}{
		{in: "", canon: ""},
		{in: "main=1", canon: "main=1"},
		{in: "main=2,admin=1", canon: "admin=1,main=2"},
		{in: "a%2Cb=1", canon: "a%2Cb=1"},       // "a,b"
		{in: "a%3Db%25=7", canon: "a%3Db%25=7"}, // "a=b%"
		{in: "a%2cb=1", canon: "a%2Cb=1"},       // lower-case escape accepted, canonical upper
		{in: "代码专家=18446744073709551615", canon: "代码专家=18446744073709551615"},
		{in: "main", err: true},
		{in: "=1", err: true},
		{in: "main=0", err: true},
		{in: "main=01", err: true},
		{in: "main=-1", err: true},
		{in: "main=+1", err: true},
		{in: "main=x", err: true},
		{in: "main=18446744073709551616", err: true},
		{in: "main=1,main=2", err: true},
		{in: "main=1,", err: true},
		{in: "a b=1", err: true},
		{in: "a%2=1", err: true},
		{in: "a%zz=1", err: true},
		{in: "a%FF=1", err: true}, // not UTF-8
	}
	for _, c := range cases {
		v, err := Parse(c.in)
		if c.err {
			if err == nil || !errors.Is(err, ErrInvalidVector) {
				t.Errorf("Parse(%q) = %v, %v; want ErrInvalidVector", c.in, v, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if v.String() != c.canon {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, v, c.canon)
		}
		back, err := Parse(v.String())
		if err != nil || Compare(back, v) != Equal {
			t.Errorf("round trip of %q: %v, %v", c.in, back, err)
		}
	}
	// Names with the escaped bytes round-trip.
	v := Vector{"a,b": 1, "x=y": 2, "p%q": 3, "tab\there": 4}
	back, err := Parse(v.String())
	if err != nil || Compare(back, v) != Equal {
		t.Errorf("round trip of %v via %q: %v, %v", v, v.String(), back, err)
	}
	// JSON carries the wire form as a string.
	b, err := json.Marshal(struct {
		V Vector `json:"v"`
		N Vector `json:"n"`
	}{V: Vector{"main": 2, "admin": 1}})
	if err != nil || string(b) != `{"v":"admin=1,main=2","n":""}` {
		t.Errorf("json = %s, %v", b, err)
	}
	var got struct{ V Vector }
	if err := json.Unmarshal([]byte(`{"V":"b=1,a=2"}`), &got); err != nil || got.V.String() != "a=2,b=1" {
		t.Errorf("json decode = %v, %v", got.V, err)
	}
}

func openStore(t *testing.T, ws string) (*Store, func() *Store) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "state.db")
	db, err := statedb.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := Open(db, Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return s, func() *Store {
		s2, err := Open(db, Options{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return s2
	}
}

func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, reopen := openStore(t, "/ws/a")
	if _, ok, err := s.File(ctx, "memory/x.md"); err != nil || ok {
		t.Fatalf("File of unknown path: ok=%v err=%v", ok, err)
	}
	fv, err := s.Increment(ctx, "memory/x.md", "main", "h1")
	if err != nil || fv.Vector.String() != "main=1" || fv.Hash != "h1" {
		t.Fatalf("Increment = %+v, %v", fv, err)
	}
	// Reconcile: same hash → nothing; another hash → a write by admin.
	if _, changed, err := s.Reconcile(ctx, "memory/x.md", "h1", "admin", true); err != nil || changed {
		t.Fatalf("Reconcile same hash: changed=%v err=%v", changed, err)
	}
	fv, changed, err := s.Reconcile(ctx, "memory/x.md", "h2", "admin", true)
	if err != nil || !changed || fv.Vector.String() != "admin=1,main=1" || fv.Hash != "h2" {
		t.Fatalf("Reconcile hand edit = %+v changed=%v err=%v", fv, changed, err)
	}
	// Reconcile of an unknown file: created only when asked, never for a missing file.
	if _, changed, _ := s.Reconcile(ctx, "memory/y.md", "h", "admin", false); changed {
		t.Fatal("Reconcile created a version without create")
	}
	if _, changed, _ := s.Reconcile(ctx, "memory/y.md", "", "admin", true); changed {
		t.Fatal("Reconcile created a version for a missing file")
	}
	if fv, changed, _ := s.Reconcile(ctx, "memory/y.md", "hy", "admin", true); !changed || fv.Vector.String() != "admin=1" {
		t.Fatalf("Reconcile create = %+v", fv)
	}

	// Commit with a conflict; a stale Expect is refused and changes nothing.
	cur := Vector{"admin": 1, "main": 1}
	next := Merge(cur, Vector{"main": 1}).Inc("writer")
	applied := 0
	fv, cf, err := s.Commit(ctx, Commit{Path: "memory/x.md", Expect: cur, Next: next, Hash: "h3",
		Conflict: &Conflict{Kind: KindOverwrite, Base: Vector{"main": 1}, Current: cur, Writer: "writer", Session: "s1", Other: "旧的文本\nold text\n", File: "memory/x.conflict-1.md"}},
		func() error { applied++; return nil })
	if err != nil || cf == nil || applied != 1 || fv.Vector.String() != next.String() {
		t.Fatalf("Commit = %+v, %+v, %v (applied %d)", fv, cf, err, applied)
	}
	if _, _, err := s.Commit(ctx, Commit{Path: "memory/x.md", Expect: cur, Next: next.Inc("x"), Hash: "h4"}, func() error { applied++; return nil }); !errors.Is(err, ErrChanged) || applied != 1 {
		t.Fatalf("stale Commit: %v (applied %d)", err, applied)
	}
	// An apply error rolls back the conflict and the version.
	boom := errors.New("boom")
	_, _, err = s.Commit(ctx, Commit{Path: "memory/x.md", Expect: next, Next: next.Inc("x"), Hash: "h5",
		Conflict: &Conflict{Kind: KindOverwrite, Writer: "x", Other: "lost?"}}, func() error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Commit with failing apply: %v", err)
	}

	s = reopen() // idempotent Open, data kept
	fv, ok, err := s.File(ctx, "memory/x.md")
	if err != nil || !ok || fv.Vector.String() != next.String() || fv.Hash != "h3" {
		t.Fatalf("after reopen: %+v ok=%v err=%v", fv, ok, err)
	}
	list, err := s.Conflicts(ctx, Filter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("Conflicts = %+v, %v", list, err)
	}
	got := list[0]
	if got.ID != cf.ID || got.Other != "旧的文本\nold text\n" || got.State != StateOpen || got.Base.String() != "main=1" ||
		got.Current.String() != cur.String() || got.Writer != "writer" || got.Session != "s1" || got.File != "memory/x.conflict-1.md" || got.Kind != KindOverwrite {
		t.Fatalf("stored conflict = %+v", got)
	}
	// Filters.
	if l, _ := s.Conflicts(ctx, Filter{Path: "memory/other.md"}); len(l) != 0 {
		t.Errorf("path filter: %+v", l)
	}
	if l, _ := s.Conflicts(ctx, Filter{State: StateResolved}); len(l) != 0 {
		t.Errorf("state filter: %+v", l)
	}
	if _, err := s.Conflicts(ctx, Filter{State: "bogus"}); err == nil {
		t.Error("unknown state accepted")
	}
	// Resolve once; twice is ErrResolved; unknown id ErrNotFound.
	r, err := s.Resolve(ctx, cf.ID, Resolution{Choice: ChoiceOther, By: "admin", Version: next.Inc("admin")})
	if err != nil || r.State != StateResolved || r.Resolution == nil || r.Resolution.Choice != ChoiceOther || r.Resolution.TS == 0 {
		t.Fatalf("Resolve = %+v, %v", r, err)
	}
	if _, err := s.Resolve(ctx, cf.ID, Resolution{Choice: ChoiceCurrent, By: "admin"}); !errors.Is(err, ErrResolved) {
		t.Fatalf("second Resolve: %v", err)
	}
	if _, err := s.Resolve(ctx, 9999, Resolution{Choice: ChoiceCurrent}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve unknown: %v", err)
	}
	if _, err := s.Conflict(ctx, 9999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Conflict unknown: %v", err)
	}
	c, err := s.Conflict(ctx, cf.ID)
	if err != nil || c.Resolution == nil || c.Resolution.Choice != ChoiceOther || c.Resolution.Version.String() != next.Inc("admin").String() {
		t.Fatalf("Conflict after resolve = %+v, %v", c, err)
	}
}

func TestStoreScopedByWorkspace(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "state.db")
	db, err := statedb.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := Open(db, Options{Workspace: "/ws/a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(db, Options{Workspace: "/ws/b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Increment(ctx, "MEMORY.md", "main", "h"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.File(ctx, "MEMORY.md"); ok {
		t.Error("workspace b sees workspace a's version")
	}
	if _, err := Open(db, Options{}); err == nil {
		t.Error("Open without a workspace succeeded")
	}
}

// Concurrent increments in transactions are never lost: 8 goroutines on two
// database handles (as two processes would have) increment the same file.
func TestConcurrentIncrements(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "state.db")
	var stores []*Store
	for i := 0; i < 2; i++ {
		db, err := statedb.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := Open(db, Options{Workspace: "/ws"})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := stores[w%2]
			name := fmt.Sprintf("w%d", w%4) // two goroutines share each writer name
			for i := 0; i < each; i++ {
				if _, err := s.Increment(ctx, "memory/2026-01-01.md", name, fmt.Sprintf("h%d-%d", w, i)); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fv, ok, err := stores[0].File(ctx, "memory/2026-01-01.md")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for w := 0; w < 4; w++ {
		if n := fv.Vector[fmt.Sprintf("w%d", w)]; n != 2*each {
			t.Errorf("writer w%d counter = %d, want %d (vector %s)", w, n, 2*each, fv.Vector)
		}
	}
}
