package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/memorytest"
)

// TestVectorIndexDamage: the real command path on an index whose vector
// table (sqlite-vec's tables) was damaged between two commands: `memory
// status` says degraded with the reason, `memory search` answers, and
// `memory index` rebuilds the vector leg (status ready, a vector-only
// search finds the note again).
func TestVectorIndexDamage(t *testing.T) {
	damages := map[string][]string{
		"vec0 table dropped":      {"DROP TABLE vec_chunks"},
		"rowids table dropped":    {"DROP TABLE vec_chunks_rowids"},
		"vector blobs dropped":    {"DROP TABLE vec_chunks_vector_chunks00"},
		"vector blob wrong size":  {"UPDATE vec_chunks_vector_chunks00 SET vectors = zeroblob(12)"},
		"vectors missing":         {"DELETE FROM vec_chunks"},
		"validity bitmap cleared": {"UPDATE vec_chunks_chunks SET validity = zeroblob(length(validity))"},
	}
	for name, stmts := range damages {
		t.Run(name, func(t *testing.T) {
			home, ws := workspace(t)
			common := []string{"--home", home, "--workspace", ws}
			run := func(want int, args ...string) string {
				t.Helper()
				code, out, errOut := runCLI(t, nil, append(args, common...)...)
				if code != want {
					t.Fatalf("atrium %v: exit %d (want %d)\nstdout: %s\nstderr: %s", args, code, want, out, errOut)
				}
				return out
			}
			status := func() memory.Status {
				t.Helper()
				var st memory.Status
				if err := json.Unmarshal([]byte(run(0, "memory", "status", "--json")), &st); err != nil {
					t.Fatal(err)
				}
				return st
			}
			run(0, "memory", "index")
			db := memorytest.IndexDB(t, home)
			damage := func() { memorytest.Damage(t, db, stmts...) }
			damage()
			if st := status(); st.State != memory.StateDegraded || !strings.Contains(st.Degraded, "vector index damaged") || !strings.Contains(st.LastError, "vector index damaged") {
				t.Fatalf("status of a damaged vector index: %+v", st)
			}
			if out := run(0, "memory", "search", "数据库连接池"); !strings.Contains(out, "1. memory/2026-11-20.md:") {
				t.Fatalf("search on a damaged vector index:\n%s", out)
			}
			damage() // the search's incremental sync repaired it; again
			if st := status(); st.State != memory.StateDegraded {
				t.Fatalf("status after the second damage: %+v", st)
			}
			if out := run(0, "memory", "index"); !strings.Contains(out, "2 files") {
				t.Fatalf("memory index:\n%s", out)
			}
			if st := status(); st.State != memory.StateReady || st.Degraded != "" {
				t.Fatalf("status after memory index: %+v", st)
			}
			if out := run(0, "memory", "search", "--mode", "vector", "staging server bluefin"); !strings.Contains(out, "1. MEMORY.md:") {
				t.Fatalf("vector search after memory index:\n%s", out)
			}
		})
	}
}
