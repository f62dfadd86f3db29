package memory

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/index"
	"github.com/atrium-dev/atrium/backend/memory/memorytest"
)

// gatedEmbedder is the builtin embedder whose batch calls (more than one
// text: indexing and the vector rebuild, never a query) wait while the
// gate is held, so that a test sees the degraded state for sure.
type gatedEmbedder struct {
	*countingEmbedder
	gate memorytest.Gate
}

func (g *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) > 1 {
		if err := g.gate.Wait(ctx); err != nil {
			return nil, err
		}
	}
	return g.countingEmbedder.Embed(ctx, texts)
}

// vectorDamage are damages to the vector table (see package index's
// tests for every kind, on the Store); each also drops the embedding
// cache, so that the rebuild must run the embedder.
var vectorDamage = map[string][]string{
	"vec0 table dropped":     {"DROP TABLE vec_chunks"},
	"shadow table dropped":   {"DROP TABLE vec_chunks_chunks"},
	"vector blobs truncated": {"UPDATE vec_chunks_vector_chunks00 SET vectors = zeroblob(10)"},
	"vector row missing":     {"DELETE FROM vec_chunks WHERE rowid = (SELECT min(id) FROM chunks)"},
	"garbage bytes":          {"UPDATE vec_chunks_vector_chunks00 SET vectors = unhex(replace(hex(zeroblob(length(vectors))), '00', 'FF'))"},
}

func damageIndex(t *testing.T, idx string, stmts []string) {
	t.Helper()
	memorytest.Damage(t, filepath.Join(idx, index.DBName), append(stmts, memorytest.DropEmbeddingCache)...)
}

// wantDegradedSearch: a search answers by keywords (no error), status
// says degraded with the reason.
func wantDegradedSearch(t *testing.T, m *Manager) {
	t.Helper()
	res, err := m.Search(context.Background(), SearchOptions{Query: "QK-7731 Dana"})
	if err != nil {
		t.Fatalf("search on a damaged vector index: %v", err)
	}
	if len(res.Results) == 0 || res.Results[0].Path != "memory/2024-05-01.md" {
		t.Fatalf("search on a damaged vector index = %v", resultPaths(res.Results))
	}
	res, err = m.Search(context.Background(), SearchOptions{Query: "向量数据库"})
	if err != nil || len(res.Results) == 0 || res.Results[0].Path != "memory/2024-05-02.md" {
		t.Fatalf("Chinese search on a damaged vector index = %v, %v", resultPaths(res.Results), err)
	}
}

func wantDegradedStatus(t *testing.T, m *Manager) {
	t.Helper()
	st := m.Status()
	if st.State != StateDegraded || !strings.Contains(st.Degraded, "vector index damaged") || !strings.Contains(st.LastError, st.Degraded) {
		t.Fatalf("status = %+v, want degraded with the reason", st)
	}
}

// wantHealed: ready again, and the vector leg answers (a vector-only
// search finds the chunk).
func wantHealed(t *testing.T, m *Manager) {
	t.Helper()
	if st := m.Status(); st.State != StateReady || st.Degraded != "" {
		t.Fatalf("status after the rebuild = %+v", st)
	}
	res, err := m.Search(context.Background(), SearchOptions{Query: "Ticket QK-7731 reported by Dana", Mode: ModeVector})
	if err != nil || !hasPath(res.Results, "memory/2024-05-01.md") {
		t.Fatalf("vector search after the rebuild = %v, %v", resultPaths(res.Results), err)
	}
}

// TestVectorDamageAcrossRestart: the index damaged while no process holds
// it (the CLI case): Open reports degraded at once, search answers by
// keywords, Sync (`atrium memory index`) rebuilds the vector leg from the
// stored chunks.
func TestVectorDamageAcrossRestart(t *testing.T) {
	for name, stmts := range vectorDamage {
		t.Run(name, func(t *testing.T) {
			g := &gatedEmbedder{countingEmbedder: newCounting(0)}
			f := newFixture(t, baseFiles, func(o *Options) { o.Embedder = g })
			f.sync(t)
			if err := f.m.Close(); err != nil {
				t.Fatal(err)
			}
			damageIndex(t, f.idx, stmts)
			f.open(t, func(o *Options) { o.Embedder = g })
			if name == "garbage bytes" {
				// Not visible to the cheap check on open: the first
				// search meets it (distances that are not numbers).
				wantDegradedSearch(t, f.m)
				poll(t, "the background rebuild", 60*time.Second, func() bool { return f.m.Status().State == StateReady })
				wantHealed(t, f.m)
				return
			}
			wantDegradedStatus(t, f.m)
			wantDegradedSearch(t, f.m)
			wantDegradedStatus(t, f.m)
			before := g.texts.Load()
			f.sync(t)
			if g.texts.Load() == before {
				t.Fatalf("the rebuild embedded nothing")
			}
			wantHealed(t, f.m)
		})
	}
}

// TestVectorDamageWhileRunning: the index damaged under a running engine
// (another process writes index.db): the next search answers by keywords,
// the state is degraded while the rebuild runs in the background, then
// ready with the vector leg back. Writes go on meanwhile.
func TestVectorDamageWhileRunning(t *testing.T) {
	for name, stmts := range vectorDamage {
		if name == "vector row missing" {
			continue // no statement meets it: found by the checks (above, and package index)
		}
		t.Run(name, func(t *testing.T) {
			g := &gatedEmbedder{countingEmbedder: newCounting(0)}
			f := newFixture(t, baseFiles, func(o *Options) { o.Embedder = g })
			runManager(t, f.m)
			g.gate.Hold() // the rebuild waits in the embedder until the gate opens
			damageIndex(t, f.idx, stmts)
			wantDegradedSearch(t, f.m)
			wantDegradedStatus(t, f.m)
			if _, err := f.m.Import(context.Background(), ImportRequest{Name: "orchid.md", Content: "The orchid needs water on Fridays.\n"}); err != nil {
				t.Fatalf("import while degraded: %v", err)
			}
			g.gate.Release()
			poll(t, "the background rebuild", 60*time.Second, func() bool { return f.m.Status().State == StateReady })
			wantHealed(t, f.m)
			res, err := f.m.Search(context.Background(), SearchOptions{Query: "orchid needs water", Mode: ModeVector})
			if err != nil || len(res.Results) == 0 {
				t.Fatalf("a note written while degraded has no vector after the rebuild: %v, %v", resultPaths(res.Results), err)
			}
		})
	}
}

// copyDir copies the regular files of the tree src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// smudge overwrites n bytes at off of every Bleve segment under dir (n < 0:
// up to -n bytes before its end).
func smudge(t *testing.T, dir string, off, n int) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "bleve", "store", "*.zap"))
	if len(segs) == 0 {
		t.Fatal("no Bleve segment to damage")
	}
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		end := off + n
		if n < 0 {
			end = len(b) + n
		}
		for i := off; i < end && i < len(b); i++ {
			b[i] = 0xA5
		}
		if err := os.WriteFile(seg, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// searchTimeDamage finds bytes of the index's Bleve segments whose damage
// Open does not see but a search does (the index is deterministic, so the
// same bytes every run): each candidate is tried on a copy of the index.
func searchTimeDamage(t *testing.T, m *Manager, q string) (off, n int) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(m.ixOpts.Dir, "bleve", "store", "*.zap"))
	if len(segs) == 0 {
		t.Fatal("no Bleve segment")
	}
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	n = 16
	for off = 0; off+n < int(fi.Size()); off += n {
		dir := t.TempDir()
		copyDir(t, m.ixOpts.Dir, dir)
		smudge(t, dir, off, n)
		o := m.ixOpts
		o.Dir, o.Logger, o.OnVectorFault, o.OnKeywordFault = dir, quietLogger(), nil, nil
		st, err := index.Open(o)
		if err != nil {
			continue
		}
		_, serr := st.Search(context.Background(), index.Query{Text: q, MaxResults: 5, MinScore: -1})
		_ = st.Close()
		if serr != nil {
			return off, n
		}
	}
	t.Skip("no damage of the segment that only a search meets")
	return 0, 0
}

// TestKeywordIndexDamage: the opposite direction. A keyword index (Bleve)
// segment with garbage in it opens but fails when its postings are read:
// the search is answered by the vector leg, the state is degraded with the
// reason, and the keyword index is rebuilt from SQLite in the background.
func TestKeywordIndexDamage(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	off, n := searchTimeDamage(t, f.m, "Ticket QK-7731 reported by Dana")
	smudge(t, f.idx, off, n)
	f.open(t, nil)
	res, err := f.m.Search(context.Background(), SearchOptions{Query: "Ticket QK-7731 reported by Dana"})
	if err != nil {
		t.Fatalf("search on a damaged keyword index: %v", err)
	}
	if len(res.Results) == 0 || res.Results[0].Path != "memory/2024-05-01.md" {
		t.Fatalf("search on a damaged keyword index = %v", resultPaths(res.Results))
	}
	if !strings.Contains(f.logs.String(), "keyword index damaged") {
		t.Fatalf("the keyword fault was not recorded:\n%s", f.logs.String())
	}
	poll(t, "the keyword index rebuild", 60*time.Second, func() bool {
		st := f.m.Status()
		return st.State == StateReady && st.Degraded == ""
	})
	res, err = f.m.Search(context.Background(), SearchOptions{Query: "QK-7731", Mode: ModeKeyword})
	if err != nil || len(res.Results) == 0 || res.Results[0].Path != "memory/2024-05-01.md" {
		t.Fatalf("keyword search after the rebuild = %v, %v", resultPaths(res.Results), err)
	}
}

// TestKeywordIndexDamageOnOpen: a segment damaged so that Bleve panics
// while opening it is moved aside and rebuilt from SQLite by Open (it
// used to take the process down).
func TestKeywordIndexDamageOnOpen(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	if err := f.m.Close(); err != nil {
		t.Fatal(err)
	}
	smudge(t, f.idx, 256, -256) // zapx panicked reading the fields section
	f.open(t, nil)
	res, err := f.m.Search(context.Background(), SearchOptions{Query: "QK-7731", Mode: ModeKeyword})
	if err != nil || len(res.Results) == 0 || res.Results[0].Path != "memory/2024-05-01.md" {
		t.Fatalf("keyword search after opening a damaged keyword index = %v, %v", resultPaths(res.Results), err)
	}
	if !strings.Contains(f.logs.String(), "damaged index: runtime error") {
		t.Fatalf("the damage was not the panicking kind:\n%s", f.logs.String())
	}
}
