// Package memorytest damages a memory index on disk the way another
// process or a failing disk would, and holds embedding calls at a gate, for
// the tests of the packages that must survive that damage (memory/index,
// memory, cli, atrium). It is imported by tests only.
//
//	db := memorytest.IndexDB(t, home) // $ATRIUM_HOME/index/<id>/index.db
//	memorytest.Damage(t, db, "DROP TABLE vec_chunks_chunks", memorytest.DropEmbeddingCache)
//
// It imports no Atrium package, so that package index's own tests may use
// it too.
package memorytest

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	sqlite_vec "github.com/asg017/sqlite-vec-go-bindings/cgo"
	_ "github.com/mattn/go-sqlite3" // database/sql driver "sqlite3"
)

// DropEmbeddingCache empties the index's embedding cache, so that a
// rebuild of damaged vectors must run the embedder again (the cache would
// otherwise give them back without an embedder call).
const DropEmbeddingCache = "DELETE FROM embedding_cache"

// busyTimeoutMs is how long Damage's statements wait for the index's own
// connections to let go of the database (SQLite busy_timeout, ms).
const busyTimeoutMs = 10000

// Damage runs stmts, in order, on the SQLite database at path (an index's
// index.db) over a connection of its own, as another process would while
// the index is open or closed. sqlite-vec is loaded into the connection,
// so that its virtual table (vec_chunks) can be dropped or written. A
// statement that fails fails t with the statement and the error.
func Damage(t testing.TB, path string, stmts ...string) {
	t.Helper()
	// Registers sqlite-vec for every new connection; registering it again
	// (package index does on its first Open) is a no-op in SQLite.
	sqlite_vec.Auto()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout="+strconv.Itoa(busyTimeoutMs))
	if err != nil {
		t.Fatalf("damage %s: %v", path, err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("damage %q: %v", q, err)
		}
	}
}

// IndexDB returns the path of the one index database under the state
// directory home ($ATRIUM_HOME/index/<workspace id>/index.db, docs/
// ARCHITECTURE.md "Data on disk"); t fails unless there is exactly one.
func IndexDB(t testing.TB, home string) string {
	t.Helper()
	dbs, err := filepath.Glob(filepath.Join(home, "index", "*", "index.db"))
	if err != nil || len(dbs) != 1 {
		t.Fatalf("index databases under %s: %v (%v), want one", home, dbs, err)
	}
	return dbs[0]
}

// Gate holds callers while it is closed, so that a test sees a state that
// a background step (a vector rebuild embedding its batches) would end
// otherwise. The zero Gate is open; it is safe for concurrent use.
type Gate struct {
	mu sync.Mutex
	ch chan struct{} // nil: open
}

// Hold closes the gate: callers of Wait block from now on. Holding a held
// gate keeps it held.
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
}

// Release opens the gate and lets every waiting caller through. Releasing
// an open gate does nothing.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

// Wait returns nil at once when the gate is open, else when it is
// released, or ctx's error when ctx ends first.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
