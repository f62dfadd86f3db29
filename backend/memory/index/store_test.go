package index

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

const testDims = 64

// toyVec is a deterministic bag-of-words embedding for tests (the real
// embedder lives in package embed; the store does not depend on it).
func toyVec(text string, dims int) []float32 {
	v := make([]float32, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%uint32(dims)]++
	}
	var n float64
	for _, x := range v {
		n += float64(x * x)
	}
	if n == 0 {
		v[0] = 1
		return v
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func testOpts(dir string) Options {
	return Options{Dir: dir, Provider: "toy", Model: "bow", Dims: testDims, Chunking: "test"}
}

func mustOpen(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// put stores a file whose chunks are the given texts (one line each).
func put(t *testing.T, s *Store, path string, texts ...string) {
	t.Helper()
	var cs []ChunkRecord
	for i, tx := range texts {
		cs = append(cs, ChunkRecord{StartLine: i + 1, EndLine: i + 1, Text: tx, Hash: sha(tx), Vector: toyVec(tx, s.Meta().Dims)})
	}
	f := FileRecord{Path: path, Hash: sha(strings.Join(texts, "\n")), MTime: 1, Size: 1, Layer: "role", Role: "main"}
	if err := s.PutFile(context.Background(), f, cs); err != nil {
		t.Fatalf("PutFile %s: %v", path, err)
	}
}

func search(t *testing.T, s *Store, text string, n int) []Hit {
	t.Helper()
	hs, err := s.Search(context.Background(), Query{Text: text, Vector: toyVec(text, s.Meta().Dims), MaxResults: n, MinScore: -1})
	if err != nil {
		t.Fatalf("Search %q: %v", text, err)
	}
	return hs
}

func paths(hs []Hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s:%d", h.Path, h.StartLine))
	}
	return out
}

func TestPutSearchDelete(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	put(t, s, "memory/a.md", "the deploy pipeline uses blue green releases", "lunch was pasta")
	put(t, s, "memory/b.md", "the cat sleeps on the sofa")
	f, c, err := s.Counts(context.Background())
	if err != nil || f != 2 || c != 3 {
		t.Fatalf("Counts = %d, %d, %v; want 2, 3", f, c, err)
	}
	hs := search(t, s, "blue green deploy", 5)
	if len(hs) == 0 || hs[0].Path != "memory/a.md" || hs[0].StartLine != 1 {
		t.Fatalf("top hit = %v, want memory/a.md:1", paths(hs))
	}
	if hs[0].Layer != "role" || hs[0].Role != "main" {
		t.Errorf("layer/role = %q/%q", hs[0].Layer, hs[0].Role)
	}
	// Replacing a file replaces its chunks.
	put(t, s, "memory/a.md", "the pipeline was retired")
	if hs := search(t, s, "pasta", 5); len(hs) > 0 && hs[0].Keyword > 0 {
		t.Errorf("old chunk still matches: %v", paths(hs))
	}
	if err := s.DeleteFile(context.Background(), "memory/b.md"); err != nil {
		t.Fatal(err)
	}
	for _, h := range search(t, s, "cat sofa", 5) {
		if h.Path == "memory/b.md" {
			t.Errorf("deleted file still found")
		}
	}
	if _, ok, _ := s.File(context.Background(), "memory/b.md"); ok {
		t.Errorf("deleted file still has a files row")
	}
	dc, _ := s.bl.DocCount()
	if _, c, _ := s.Counts(context.Background()); int(dc) != c {
		t.Errorf("bleve docs %d != chunks %d", dc, c)
	}
}

func TestKeywordAnalyzerCJKAndOr(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	put(t, s, "memory/zh.md", "我们决定使用向量数据库来保存记忆", "今天下雨了")
	put(t, s, "memory/zh2.md", "記憶系統的設計") // traditional
	put(t, s, "memory/en.md", "alpha release notes", "zeta team retro")
	cases := []struct {
		q    string
		want string
	}{
		{"向量", "memory/zh.md:1"},    // two-character word = one bigram
		{"雨", "memory/zh.md:2"},     // single character (unigram)
		{"数据库", "memory/zh.md:1"},   // three characters
		{"設計", "memory/zh2.md:1"},   // traditional
		{"ALPHA", "memory/en.md:1"}, // lower-cased
	}
	for _, c := range cases {
		hs, err := s.Search(context.Background(), Query{Text: c.q, MaxResults: 3, MinScore: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 0 || fmt.Sprintf("%s:%d", hs[0].Path, hs[0].StartLine) != c.want {
			t.Errorf("%q: got %v, want %s first", c.q, paths(hs), c.want)
		}
	}
	// Simplified and Traditional find each other (issue 15): both notes
	// hold 记忆/記憶, and either script finds both, scored alike.
	for _, q := range []string{"记忆", "記憶"} {
		hs, err := s.Search(context.Background(), Query{Text: q, MaxResults: 3, MinScore: -1})
		if err != nil {
			t.Fatal(err)
		}
		if got := paths(hs); len(got) != 2 || got[0] != "memory/zh2.md:1" || got[1] != "memory/zh.md:1" {
			t.Errorf("%q: got %v, want both notes, the shorter first", q, got)
		}
	}
	// Terms are OR-ed: each document matches one of the two words.
	hs, err := s.Search(context.Background(), Query{Text: "alpha zeta", MaxResults: 5, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, h := range hs {
		if h.Keyword > 0 {
			got[fmt.Sprintf("%s:%d", h.Path, h.StartLine)] = true
		}
	}
	if !got["memory/en.md:1"] || !got["memory/en.md:2"] {
		t.Errorf("OR query: got %v", paths(hs))
	}
	// Full-width Latin is folded by cjk_width.
	if hs, _ := s.Search(context.Background(), Query{Text: "ａｌｐｈａ", MaxResults: 1, MinScore: -1}); len(hs) == 0 || hs[0].Path != "memory/en.md" {
		t.Errorf("full-width query: got %v", paths(hs))
	}
}

// An exact identifier found only by the keyword leg (its embedding says
// nothing about it) must pass the default minScore 0.35.
func TestKeywordOnlyIdentifier(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	for i := 0; i < 80; i++ {
		put(t, s, fmt.Sprintf("memory/n%02d.md", i), fmt.Sprintf("note %d about gardening and tomatoes", i))
	}
	put(t, s, "memory/ticket.md", "ticket QK-7731 was closed after the outage")
	// A query vector orthogonal to everything the ticket chunk contains.
	qv := make([]float32, testDims)
	qv[0] = 1
	hs, err := s.Search(context.Background(), Query{Text: "QK-7731", Vector: qv, MaxResults: 6, MinScore: 0.35})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) == 0 || hs[0].Path != "memory/ticket.md" {
		t.Fatalf("identifier not returned: %v", paths(hs))
	}
	if hs[0].Score < 0.35 || hs[0].Keyword != 1 {
		t.Errorf("score %.3f keyword %.3f", hs[0].Score, hs[0].Keyword)
	}
}

func TestFuseScores(t *testing.T) {
	cases := []struct{ v, k, want float64 }{
		{0, 1, 0.5},        // keyword only, best keyword match
		{0, 0.7, 0.35},     // keyword only at 70 % of the best
		{1, 0, 0.7},        // vector only
		{0.5, 0.5, 0.5},    // hybrid
		{0.8, 1, 0.86},     // both legs agree
		{0.2, 0.9, 0.45},   // keyword floor wins
		{0.2, 0.2, 0.2},    // hybrid
		{0.0, 0.0, 0.0},    // nothing
		{0.4, 0.05, 0.295}, // hybrid
	}
	for _, c := range cases {
		if got := FuseScores(c.v, c.k); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("FuseScores(%v,%v) = %v, want %v", c.v, c.k, got, c.want)
		}
	}
	if PoolSize(1) != 50 || PoolSize(6) != 50 || PoolSize(20) != 80 || PoolSize(1e6) != MaxPool {
		t.Errorf("PoolSize wrong")
	}
}

// The order of results must not depend on MaxResults, and the exactly
// completed keyword scores must equal the pool's scores.
func TestOrderIndependentOfMaxResults(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	words := []string{"apple", "river", "stone", "cloud", "forest", "engine", "paper", "violin", "garden", "window"}
	for i := 0; i < 300; i++ {
		var b []string
		for j := 0; j < 6; j++ {
			b = append(b, words[(i*7+j*j+i/3)%len(words)])
		}
		put(t, s, fmt.Sprintf("memory/f%03d.md", i), strings.Join(b, " ")+fmt.Sprintf(" item%d", i))
	}
	settle(t, s)
	for _, q := range []string{"apple river", "violin garden window", "stone", "item7 cloud"} {
		small := search(t, s, q, 3)
		big := search(t, s, q, 40)
		if len(small) != 3 || len(big) < 3 {
			t.Fatalf("%q: %d / %d hits", q, len(small), len(big))
		}
		for i := range small {
			if small[i].ChunkID != big[i].ChunkID || small[i].Score != big[i].Score {
				t.Errorf("%q: rank %d differs: %v vs %v (%v %v / %v %v)", q, i, paths(small), paths(big[:3]), small[i].Score, small[i].Keyword, big[i].Score, big[i].Keyword)
				break
			}
		}
	}
	// Scoring chosen chunks gives the scores of the top-k query.
	kl := keywordLeg(t, s, "apple river", nil)
	top, _, err := kl.top(context.Background(), 10)
	if err != nil || len(top) < 8 {
		t.Fatalf("top: %d hits, %v", len(top), err)
	}
	some, err := kl.score(context.Background(), []uint64{top[7].num, top[3].num})
	if err != nil || len(some) != 2 {
		t.Fatalf("score: %d hits, %v", len(some), err)
	}
	want := map[uint64]float64{top[3].num: top[3].score, top[7].num: top[7].score}
	for _, h := range some {
		if h.score != want[h.num] {
			t.Errorf("scored %v != top-k score %v", h.score, want[h.num])
		}
	}
}

func TestDuplicateTextCollapsed(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	put(t, s, "memory/a.md", "shared paragraph about kubernetes upgrades")
	put(t, s, "memory/b.md", "shared paragraph about kubernetes upgrades")
	put(t, s, "memory/c.md", "kubernetes")
	hs := search(t, s, "kubernetes upgrades", 5)
	n := 0
	for _, h := range hs {
		if h.Hash == sha("shared paragraph about kubernetes upgrades") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("duplicates not collapsed: %v", paths(hs))
	}
}

func TestIncompatibleAndPromote(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	put(t, s, "memory/a.md", "orchids need indirect light")
	s.Close()

	o := testOpts(dir)
	o.Dims = 32
	s2 := mustOpen(t, o)
	if s2.Compatible() {
		t.Fatal("store with other dims reported compatible")
	}
	if s2.Meta().Dims != testDims {
		t.Errorf("meta dims %d", s2.Meta().Dims)
	}
	err := s2.PutFile(context.Background(), FileRecord{Path: "x.md"}, nil)
	if !errors.Is(err, ErrIncompatible) {
		t.Errorf("PutFile on incompatible store: %v", err)
	}
	// The old index still answers keyword queries.
	if hs, _ := s2.Search(context.Background(), Query{Text: "orchids", Vector: toyVec("orchids", 32), MaxResults: 3, MinScore: -1}); len(hs) != 1 {
		t.Errorf("keyword search on incompatible store: %v", paths(hs))
	}
	st, err := OpenStaging(o)
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, "memory/a.md", "orchids need indirect light")
	st.Close()
	s2.Close()
	if err := Promote(dir); err != nil {
		t.Fatal(err)
	}
	s3 := mustOpen(t, o)
	if !s3.Compatible() || s3.Meta().Dims != 32 {
		t.Fatalf("after promote: compatible=%v dims=%d", s3.Compatible(), s3.Meta().Dims)
	}
	hs := search(t, s3, "orchids light", 3)
	if len(hs) != 1 || hs[0].Vector <= 0 {
		t.Errorf("after promote: %v", paths(hs))
	}
	if _, err := os.Stat(filepath.Join(dir, StagingDir)); !os.IsNotExist(err) {
		t.Errorf("staging dir left behind")
	}
}

func TestCorruptDatabaseMovedAside(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	put(t, s, "memory/a.md", "hello world")
	s.Close()
	for _, suf := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(dir, DBName+suf))
	}
	if err := os.WriteFile(filepath.Join(dir, DBName), []byte(strings.Repeat("garbage!", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, testOpts(dir))
	if f, c, err := s2.Counts(context.Background()); err != nil || f != 0 || c != 0 {
		t.Fatalf("recovered store: %d files %d chunks %v", f, c, err)
	}
	// The stale Bleve docs of the old database are gone (new generation).
	if dc, _ := s2.bl.DocCount(); dc != 0 {
		t.Errorf("bleve docs after recovery: %d", dc)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, DBName+".corrupt-*"))
	if len(aside) != 1 {
		t.Errorf("corrupt copy not kept: %v", aside)
	}
	put(t, s2, "memory/a.md", "hello again")
	if hs := search(t, s2, "hello", 3); len(hs) != 1 {
		t.Errorf("search after recovery: %v", paths(hs))
	}
}

func TestCorruptBleveRebuiltFromSQLite(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	put(t, s, "memory/a.md", "quarterly budget review", "coffee machine broken")
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, BleveName, "index_meta.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, testOpts(dir))
	hs, err := s2.Search(context.Background(), Query{Text: "coffee", MaxResults: 3, MinScore: -1})
	if err != nil || len(hs) != 1 || hs[0].StartLine != 2 {
		t.Fatalf("keyword search after bleve rebuild: %v %v", paths(hs), err)
	}
}

// A crash between the SQLite commit and the Bleve batch leaves journal rows
// (and possibly orphan Bleve docs); the next Open repairs both.
func TestReconcileAfterInterruptedWrite(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	put(t, s, "memory/a.md", "sailing boat regatta")
	put(t, s, "memory/b.md", "mountain hiking trail")
	var idA int64
	if err := s.db.QueryRow("SELECT id FROM chunks WHERE path = 'memory/a.md'").Scan(&idA); err != nil {
		t.Fatal(err)
	}
	// Simulate: SQLite committed chunk a, Bleve never saw it; Bleve has an orphan doc.
	if _, err := s.db.Exec("INSERT INTO bleve_journal(chunk_id, op) VALUES(?, ?)", idA, opIndex); err != nil {
		t.Fatal(err)
	}
	if err := s.bl.Delete(docID(idA)); err != nil {
		t.Fatal(err)
	}
	if err := s.bl.Index("999999", bleveDoc{Text: "orphan sailing"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2 := mustOpen(t, testOpts(dir))
	hs, err := s2.Search(context.Background(), Query{Text: "sailing", MaxResults: 5, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Path != "memory/a.md" {
		t.Errorf("after reconcile: %v", paths(hs))
	}
	dc, _ := s2.bl.DocCount()
	if dc != 2 {
		t.Errorf("bleve docs = %d, want 2", dc)
	}
	var n int
	s2.db.QueryRow("SELECT count(*) FROM bleve_journal").Scan(&n)
	if n != 0 {
		t.Errorf("journal rows left: %d", n)
	}
}

func TestEmbeddingCache(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	put(t, s, "memory/a.md", "one", "two")
	got, err := s.CachedEmbeddings(context.Background(), []string{sha("one"), sha("two"), sha("three")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[sha("one")]) != testDims {
		t.Errorf("cache = %d entries", len(got))
	}
	// The cache survives deleting the file (rename = delete + add without re-embedding).
	s.DeleteFile(context.Background(), "memory/a.md")
	got, _ = s.CachedEmbeddings(context.Background(), []string{sha("one")})
	if len(got) != 1 {
		t.Errorf("cache lost on delete")
	}
}

func bleveReq(q query.Query, n int) *bleve.SearchRequest {
	return bleve.NewSearchRequestOptions(q, n, 0, false)
}

// TestNoEmbeddingCache: with Options.NoEmbeddingCache the Store writes no
// vectors into the embedding cache and finds none there (not even rows an
// earlier Store wrote), while the vector leg still searches the chunks.
func TestNoEmbeddingCache(t *testing.T) {
	for _, off := range []bool{false, true} {
		o := testOpts(t.TempDir())
		o.NoEmbeddingCache = off
		s := mustOpen(t, o)
		put(t, s, "a.md", "alpha beta", "gamma delta")
		var rows int
		if err := s.db.QueryRow("SELECT count(*) FROM embedding_cache").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 2, true: 0}[off]; rows != want {
			t.Errorf("NoEmbeddingCache %v: %d cache rows, want %d", off, rows, want)
		}
		if _, err := s.db.Exec("INSERT OR IGNORE INTO embedding_cache(provider, model, dims, hash, embedding) VALUES(?, ?, ?, ?, ?)",
			o.Provider, o.Model, o.Dims, sha("alpha beta"), encodeVector(toyVec("alpha beta", o.Dims))); err != nil {
			t.Fatal(err)
		}
		for name, read := range map[string]func(context.Context, []string) (map[string][]float32, error){
			"CachedEmbeddings": s.CachedEmbeddings, "CommittedEmbeddings": s.CommittedEmbeddings,
		} {
			got, err := read(context.Background(), []string{sha("alpha beta")})
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) == 1) == off {
				t.Errorf("NoEmbeddingCache %v: %s found %d vectors", off, name, len(got))
			}
		}
		hs, err := s.Search(context.Background(), Query{Vector: toyVec("gamma delta", o.Dims), MaxResults: 1, MinScore: -1})
		if err != nil || len(hs) != 1 || hs[0].Text != "gamma delta" {
			t.Errorf("NoEmbeddingCache %v: vector search: %+v %v", off, hs, err)
		}
	}
}
