package index

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory/memorytest"
)

// vectorDamages are the kinds of damage a vector table can suffer, each a
// function of an open database holding the index (sqlite-vec is loaded on
// every connection of the process). live: whether a search on a Store that
// was open while it happened sees it (the others are found by the checks).
var vectorDamages = []struct {
	name string
	sql  []string
	// deep: only the deep check (VerifyVectors) or a search can see it.
	deep bool
}{
	{name: "vec0 table dropped", sql: []string{"DROP TABLE vec_chunks"}},
	{name: "chunks shadow dropped", sql: []string{"DROP TABLE vec_chunks_chunks"}},
	{name: "rowids shadow dropped", sql: []string{"DROP TABLE vec_chunks_rowids"}},
	{name: "vector blobs dropped", sql: []string{"DROP TABLE vec_chunks_vector_chunks00"}},
	{name: "info shadow dropped", sql: []string{"DROP TABLE vec_chunks_info"}},
	{name: "vector blob truncated", sql: []string{"UPDATE vec_chunks_vector_chunks00 SET vectors = zeroblob(10)"}},
	{name: "rowids blob truncated", sql: []string{"UPDATE vec_chunks_chunks SET rowids = zeroblob(3)"}},
	{name: "validity cleared", sql: []string{"UPDATE vec_chunks_chunks SET validity = zeroblob(length(validity))"}},
	{name: "rowid row deleted", sql: []string{"DELETE FROM vec_chunks_rowids WHERE rowid = (SELECT min(rowid) FROM vec_chunks_rowids)"}},
	{name: "vector row missing", sql: []string{"DELETE FROM vec_chunks WHERE rowid = (SELECT min(id) FROM chunks)"}},
	{name: "orphan vector", sql: []string{"INSERT INTO vec_chunks(rowid, embedding) SELECT 999999, embedding FROM vec_chunks LIMIT 1"}},
	{name: "wrong dimension", sql: []string{"DROP TABLE vec_chunks", "CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[8] distance_metric=cosine)",
		"INSERT INTO vec_chunks(rowid, embedding) SELECT id, vec_f32('[1,0,0,0,0,0,0,0]') FROM chunks"}},
	{name: "garbage bytes (NaN)", sql: []string{"UPDATE vec_chunks_vector_chunks00 SET vectors = " + blobSQL(0xff)}, deep: true},
	{name: "garbage bytes (finite)", sql: []string{"UPDATE vec_chunks_vector_chunks00 SET vectors = " + blobSQL(0x3c)}, deep: true},
}

// blobSQL is an SQL expression for a vectors blob as long as the current
// one, every byte b.
func blobSQL(b byte) string {
	h := strings.ToUpper(string("0123456789abcdef"[b>>4]) + string("0123456789abcdef"[b&15]))
	return "unhex(replace(hex(zeroblob(length(vectors))), '00', '" + h + "'))"
}

var vectorCorpus = map[string][]string{
	"memory/a.md": {"the deploy pipeline uses blue green releases", "lunch was pasta with basil"},
	"memory/b.md": {"the cat sleeps on the sofa all afternoon"},
	"memory/c.md": {"QK-7731 migration postponed to March", "数据库迁移推迟到三月"},
}

func fillVectorCorpus(t *testing.T, s *Store) {
	t.Helper()
	for _, p := range []string{"memory/a.md", "memory/b.md", "memory/c.md"} {
		put(t, s, p, vectorCorpus[p]...)
	}
}

// rebuildVectors is the caller's repair (package memory does the same with
// its embedder): reset, embed every chunk without a vector, clear.
func rebuildVectors(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.ResetVectors(ctx); err != nil {
		t.Fatalf("ResetVectors: %v", err)
	}
	var after int64
	for {
		rows, err := s.MissingVectors(ctx, after, 2)
		if err != nil {
			t.Fatalf("MissingVectors: %v", err)
		}
		if len(rows) == 0 {
			break
		}
		for i := range rows {
			rows[i].Vector = toyVec(rows[i].Text, s.Meta().Dims)
			after = rows[i].ID
		}
		if _, err := s.PutVectors(ctx, rows); err != nil {
			t.Fatalf("PutVectors: %v", err)
		}
	}
	if err := s.ClearVectorFault(ctx); err != nil {
		t.Fatalf("ClearVectorFault: %v", err)
	}
}

// wantKeywordAnswer checks that a hybrid search answers without error and
// finds the chunk by its keywords.
func wantKeywordAnswer(t *testing.T, s *Store, q, wantPath string) {
	t.Helper()
	hs, err := s.Search(context.Background(), Query{Text: q, Vector: toyVec(q, s.Meta().Dims), MaxResults: 5, MinScore: 0.2})
	if err != nil {
		t.Fatalf("Search %q on a damaged vector table: %v", q, err)
	}
	if len(hs) == 0 || hs[0].Path != wantPath {
		t.Fatalf("Search %q = %v, want %s first", q, paths(hs), wantPath)
	}
	for _, h := range hs {
		if math.IsNaN(h.Score) || h.Score < 0 || h.Score > 1 {
			t.Fatalf("Search %q: score %v", q, h.Score)
		}
	}
}

// wantHybrid checks that the vector leg answers again.
func wantHybrid(t *testing.T, s *Store) {
	t.Helper()
	if err := s.VectorFault(); err != nil {
		t.Fatalf("VectorFault after the rebuild: %v", err)
	}
	if err := s.VerifyVectors(context.Background()); err != nil {
		t.Fatalf("VerifyVectors after the rebuild: %v", err)
	}
	hs := search(t, s, "cat sleeps sofa", 3)
	if len(hs) == 0 || hs[0].Path != "memory/b.md" || hs[0].Vector < 0.5 {
		t.Fatalf("hybrid search after the rebuild: %v (vector %v)", paths(hs), hs)
	}
	var chunks, vecs int
	if err := s.db.QueryRow("SELECT count(*) FROM chunks").Scan(&chunks); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow("SELECT count(*) FROM vec_chunks").Scan(&vecs); err != nil {
		t.Fatal(err)
	}
	if chunks != vecs {
		t.Fatalf("%d chunks, %d vectors after the rebuild", chunks, vecs)
	}
}

// TestVectorDamageOnOpen: every kind of damage to the vector table, found
// when the index is opened again (a restart): the Store opens, reports the
// fault, answers by keywords, accepts writes, and is rebuilt in place from
// its chunks.
func TestVectorDamageOnOpen(t *testing.T) {
	ctx := context.Background()
	for _, d := range vectorDamages {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, testOpts(dir))
			fillVectorCorpus(t, s)
			if err := s.VectorFault(); err != nil {
				t.Fatalf("fault before the damage: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			memorytest.Damage(t, filepath.Join(dir, DBName), d.sql...)
			s = mustOpen(t, testOpts(dir))
			if d.deep {
				if s.VectorFault() != nil {
					t.Logf("found by the cheap check: %v", s.VectorFault())
				} else if err := s.VerifyVectors(ctx); !errors.Is(err, ErrVectorsDamaged) {
					t.Fatalf("VerifyVectors = %v, want ErrVectorsDamaged", err)
				}
			}
			if err := s.VectorFault(); !errors.Is(err, ErrVectorsDamaged) {
				t.Fatalf("VectorFault = %v, want ErrVectorsDamaged", err)
			}
			t.Logf("fault: %v", s.VectorFault())
			if _, c, _ := s.Counts(ctx); c != 5 {
				t.Fatalf("chunks = %d after the damage, want 5 (the index was thrown away?)", c)
			}
			wantKeywordAnswer(t, s, "QK-7731 migration", "memory/c.md")
			wantKeywordAnswer(t, s, "数据库迁移", "memory/c.md")
			// Writes go on without vectors.
			put(t, s, "memory/d.md", "the orchid needs water on fridays")
			if err := s.DeleteFile(ctx, "memory/a.md"); err != nil {
				t.Fatalf("DeleteFile while damaged: %v", err)
			}
			wantKeywordAnswer(t, s, "orchid water", "memory/d.md")
			rebuildVectors(t, s)
			wantHybrid(t, s)
			// The rebuilt table stays sound across a restart.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = mustOpen(t, testOpts(dir))
			wantHybrid(t, s)
			if hs := search(t, s, "orchid water", 1); len(hs) == 0 || hs[0].Vector < 0.5 {
				t.Fatalf("chunk written while damaged has no vector after the rebuild: %+v", hs)
			}
		})
	}
}

// TestVectorDamageWhileOpen: the same damage done under a running Store
// (another process edits index.db): the first search that meets it
// records the fault, tells OnVectorFault and answers by keywords;
// damage that no statement meets is found by VerifyVectors.
func TestVectorDamageWhileOpen(t *testing.T) {
	ctx := context.Background()
	for _, d := range vectorDamages {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			o := testOpts(dir)
			var told atomic.Int32
			o.OnVectorFault = func(err error) {
				if !errors.Is(err, ErrVectorsDamaged) {
					t.Errorf("OnVectorFault(%v)", err)
				}
				told.Add(1)
			}
			s := mustOpen(t, o)
			fillVectorCorpus(t, s)
			memorytest.Damage(t, filepath.Join(dir, DBName), d.sql...)
			wantKeywordAnswer(t, s, "QK-7731 migration", "memory/c.md")
			if s.VectorFault() == nil {
				if err := s.VerifyVectors(ctx); !errors.Is(err, ErrVectorsDamaged) {
					t.Fatalf("damage unseen: VerifyVectors = %v", err)
				}
			}
			if told.Load() != 1 {
				t.Fatalf("OnVectorFault called %d times, want 1", told.Load())
			}
			wantKeywordAnswer(t, s, "数据库迁移", "memory/c.md")
			put(t, s, "memory/d.md", "the orchid needs water on fridays")
			rebuildVectors(t, s)
			wantHybrid(t, s)
		})
	}
}

// TestVectorlessCount: chunks stored without a vector (zero vectors) are
// not a fault, across writes, deletes and a restart.
func TestVectorlessCount(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	zero := make([]float32, testDims)
	f := FileRecord{Path: "memory/z.md", Hash: "h", MTime: 1, Size: 1, Layer: "global"}
	cs := []ChunkRecord{{StartLine: 1, EndLine: 1, Text: "no vector here", Hash: sha("no vector here"), Vector: zero},
		{StartLine: 2, EndLine: 2, Text: "a vector here", Hash: sha("a vector here"), Vector: toyVec("a vector here", testDims)}}
	if err := s.PutFile(ctx, f, cs); err != nil {
		t.Fatal(err)
	}
	fillVectorCorpus(t, s)
	if err := s.PutFile(ctx, f, cs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyVectors(ctx); err != nil {
		t.Fatalf("VerifyVectors: %v", err)
	}
	s.Close()
	s = mustOpen(t, testOpts(dir))
	if err := s.VectorFault(); err != nil {
		t.Fatalf("a zero vector is not a fault: %v", err)
	}
	if err := s.DeleteFile(ctx, "memory/z.md"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, testOpts(dir))
	if err := s.VectorFault(); err != nil {
		t.Fatalf("after deleting the file without vectors: %v", err)
	}
	// An index written before the count existed gets it computed.
	memorytest.Damage(t, filepath.Join(dir, DBName), "DELETE FROM meta WHERE key = 'vectorless'")
	s.Close()
	s = mustOpen(t, testOpts(dir))
	if err := s.VectorFault(); err != nil {
		t.Fatalf("index without the count: %v", err)
	}
	if err := s.SetMetaValue(ctx, vectorlessKey, "0"); err == nil {
		t.Fatalf("SetMetaValue(%s) accepted", vectorlessKey)
	}
}

// TestGarbageVectorQuantized: above QuantizeAbove the quantized copy's load
// is the deep check.
func TestGarbageVectorQuantized(t *testing.T) {
	dir := t.TempDir()
	o := testOpts(dir)
	o.QuantizeAbove = 2
	s := mustOpen(t, o)
	fillVectorCorpus(t, s)
	s.Close()
	memorytest.Damage(t, filepath.Join(dir, DBName), "UPDATE vec_chunks_vector_chunks00 SET vectors = "+blobSQL(0x3c))
	s = mustOpen(t, o)
	wantKeywordAnswer(t, s, "QK-7731 migration", "memory/c.md")
	if err := s.VectorFault(); !errors.Is(err, ErrVectorsDamaged) {
		t.Fatalf("VectorFault = %v", err)
	}
	rebuildVectors(t, s)
	wantHybrid(t, s)
	if !s.quant.isLoaded() {
		if err := s.ensureQuant(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.quant.count(); n != 5 {
		t.Fatalf("quantized copy holds %d vectors, want 5", n)
	}
}

// TestCheckVectorRejects pins the deep check's rules.
func TestCheckVectorRejects(t *testing.T) {
	unit := toyVec("a b c", 8)
	if err := checkVector(1, unit, 8); err != nil {
		t.Fatalf("unit vector rejected: %v", err)
	}
	b := encodeVector(unit)
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(float32(math.NaN())))
	for name, v := range map[string][]float32{"dims": unit[:4], "nan": decodeVector(b), "length": {2, 0, 0, 0, 0, 0, 0, 0}} {
		if err := checkVector(1, v, 8); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
