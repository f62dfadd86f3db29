package memorytest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/memorytest"
)

// fatalTB records a Fatalf instead of failing the test, and ends the
// goroutine that called it as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatal runs fn with a fatalTB on a goroutine of its own and returns what
// it failed with ("" when it did not).
func fatal(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// TestDamage: the statements run on a connection of their own, sqlite-vec
// loaded (a vec0 table is created, written and dropped), and a failing
// statement fails the test naming it.
func TestDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	memorytest.Damage(t, path,
		"CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[2])",
		"INSERT INTO vec_chunks(rowid, embedding) VALUES (1, '[1,0]')",
		"CREATE TABLE embedding_cache (hash TEXT)",
		"INSERT INTO embedding_cache VALUES ('h')")
	memorytest.Damage(t, path, "DROP TABLE vec_chunks", memorytest.DropEmbeddingCache)
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables, cached int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name LIKE 'vec_chunks%'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT count(*) FROM embedding_cache").Scan(&cached); err != nil {
		t.Fatal(err)
	}
	if tables != 0 || cached != 0 {
		t.Fatalf("after the damage: %d vec_chunks tables, %d cached embeddings; want none", tables, cached)
	}
	msg := fatal(t, func(tb testing.TB) { memorytest.Damage(tb, path, "DROP TABLE no_such_table") })
	if !strings.Contains(msg, "DROP TABLE no_such_table") || !strings.Contains(msg, "no such table") {
		t.Fatalf("a failing statement failed the test with %q", msg)
	}
}

func TestIndexDB(t *testing.T) {
	home := t.TempDir()
	if msg := fatal(t, func(tb testing.TB) { memorytest.IndexDB(tb, home) }); msg == "" {
		t.Fatal("IndexDB found a database in an empty home")
	}
	want := filepath.Join(home, "index", "0123456789abcdef", "index.db")
	if err := os.MkdirAll(filepath.Dir(want), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := memorytest.IndexDB(t, home); got != want {
		t.Fatalf("IndexDB = %q, want %q", got, want)
	}
	second := filepath.Join(home, "index", "fedcba9876543210", "index.db")
	if err := os.MkdirAll(filepath.Dir(second), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if msg := fatal(t, func(tb testing.TB) { memorytest.IndexDB(tb, home) }); msg == "" {
		t.Fatal("IndexDB chose one of two databases")
	}
}

// TestGate: an open gate lets Wait through; a held one blocks it until
// Release (every waiter) or until the waiter's ctx ends.
func TestGate(t *testing.T) {
	var g memorytest.Gate
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on an open gate: %v", err)
	}
	g.Hold()
	g.Hold() // still one hold
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a held gate with an ended ctx = %v", err)
	}
	const waiters = 3
	passed := make(chan error, waiters)
	for range waiters {
		go func() { passed <- g.Wait(context.Background()) }()
	}
	select {
	case err := <-passed:
		t.Fatalf("Wait passed a held gate: %v", err)
	default:
	}
	g.Release()
	deadline := time.After(30 * time.Second)
	for range waiters {
		select {
		case err := <-passed:
			if err != nil {
				t.Fatalf("Wait after Release: %v", err)
			}
		case <-deadline:
			t.Fatal("a waiter was not let through by Release within 30 s")
		}
	}
	g.Release() // releasing an open gate does nothing
	if err := g.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after Release: %v", err)
	}
}
