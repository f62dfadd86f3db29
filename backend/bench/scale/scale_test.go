package scale

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
)

// corporaOrSkip returns the shared corpora or skips the test.
func corporaOrSkip(t *testing.T) string {
	t.Helper()
	c, err := FindCorpora()
	if errors.Is(err, ErrNoCorpora) {
		t.Skipf("shared corpora not available (set ATRIUM_CORPORA or put shared/corpora next to the repository): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
}

// A small run (two steps, ~2k chunks) through the real pipeline: the report
// is complete and consistent. Timings are reported, never asserted.
func TestRunSmall(t *testing.T) {
	root := corporaOrSkip(t)
	dir := t.TempDir()
	rep, err := Run(context.Background(), Options{Corpora: root, Dir: dir, Sizes: []int{1000, 2000}, Queries: 12, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Queries != 12 || rep.EnglishQueries != 6 || rep.ChineseQueries != 6 {
		t.Errorf("queries %d (%d en, %d zh), want 12 (6, 6)", rep.Queries, rep.EnglishQueries, rep.ChineseQueries)
	}
	if rep.CPUs <= 0 || rep.GoVersion == "" || rep.Embedder == "" || rep.Chunking == "" || rep.Date == "" {
		t.Errorf("incomplete header: %+v", rep)
	}
	if len(rep.Steps) != 2 || len(rep.Growth) != 1 {
		t.Fatalf("%d steps, %d growth rows", len(rep.Steps), len(rep.Growth))
	}
	prev := 0
	for i, s := range rep.Steps {
		if s.Chunks < s.TargetChunks || s.Chunks > s.TargetChunks+20 {
			t.Errorf("step %d: %d chunks for a target of %d", i, s.Chunks, s.TargetChunks)
		}
		if s.NewChunks != s.Chunks-prev {
			t.Errorf("step %d: %d new chunks, want %d", i, s.NewChunks, s.Chunks-prev)
		}
		prev = s.Chunks
		if s.DuplicateChunks*100 > s.Chunks {
			t.Errorf("step %d: %d of %d chunk texts are duplicates", i, s.DuplicateChunks, s.Chunks)
		}
		if s.Files == 0 || s.IndexSeconds <= 0 || s.ChunksPerSecond <= 0 {
			t.Errorf("step %d: files %d, index %v s, %v chunks/s", i, s.Files, s.IndexSeconds, s.ChunksPerSecond)
		}
		if s.MarkdownBytes <= 0 || s.SQLiteBytes <= 0 || s.BleveBytes <= 0 || s.IndexBytes < s.SQLiteBytes+s.BleveBytes {
			t.Errorf("step %d: sizes md %d sqlite %d bleve %d index %d", i, s.MarkdownBytes, s.SQLiteBytes, s.BleveBytes, s.IndexBytes)
		}
		if s.RSSMB <= 0 || s.PeakRSSMB < s.RSSMB {
			t.Errorf("step %d: rss %v MB, peak %v MB", i, s.RSSMB, s.PeakRSSMB)
		}
		if s.VectorLeg != "exact" {
			t.Errorf("step %d: vector leg %q at %d chunks, want exact", i, s.VectorLeg, s.Chunks)
		}
		for name, l := range map[string]Latency{"hybrid": s.Hybrid, "hybridRepeat": s.HybridRepeat, "keyword": s.Keyword, "vector": s.Vector} {
			if l.P50Ms <= 0 || l.P99Ms < l.P50Ms || l.MaxMs < l.P99Ms || l.MeanMs <= 0 {
				t.Errorf("step %d: %s latency %+v", i, name, l)
			}
		}
		if s.RecallAt10 <= 0 || s.RecallAt10 > 1 {
			t.Errorf("step %d: recall@10 %v", i, s.RecallAt10)
		}
		if s.FirstResultMismatches != 0 {
			t.Errorf("step %d: %d queries with a first result that depends on maxResults", i, s.FirstResultMismatches)
		}
		if s.EditSearchableMs <= 0 {
			t.Errorf("step %d: edit searchable after %v ms", i, s.EditSearchableMs)
		}
	}
	g := rep.Growth[0]
	if g.From != rep.Steps[0].Chunks || g.To != rep.Steps[1].Chunks || g.Chunks <= 1 || g.HybridP50 <= 0 || g.IndexBytes <= 1 {
		t.Errorf("growth row %+v", g)
	}
	// The JSON field names are documented and stable.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"steps"`, `"growth"`, `"chunksPerSecond"`, `"hybrid"`, `"p50Ms"`, `"p99Ms"`, `"recallAt10"`, `"editSearchableMs"`, `"firstResultMismatches"`, `"peakRssMB"`, `"vectorLeg"`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("JSON lacks %s", f)
		}
	}
}

// The generated daily logs are real text recombined: every line of a file
// (but the headings) comes from the corpus, chunks are about the chunking
// size, and the same seed writes the same files.
func TestGeneratorDeterministicRealText(t *testing.T) {
	root := corporaOrSkip(t)
	c, err := loadCorpus(root)
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]bool{}
	for _, s := range c.sources {
		for _, u := range s.units {
			units[u] = true
		}
	}
	var texts [2][]string
	for run := range texts {
		ws := t.TempDir()
		g := newGenerator(c, ws, 7, 4)
		if err := g.grow(300); err != nil {
			t.Fatal(err)
		}
		if g.dups != 0 {
			t.Errorf("%d duplicate chunks in 300", g.dups)
		}
		for i := 0; i < g.files; i++ {
			b, err := os.ReadFile(filepath.Join(ws, g.path(i)))
			if err != nil {
				t.Fatal(err)
			}
			texts[run] = append(texts[run], string(b))
		}
	}
	if strings.Join(texts[0], "\x00") != strings.Join(texts[1], "\x00") {
		t.Error("same seed, different files")
	}
	var sizes []int
	for _, tx := range texts[0] {
		for _, l := range strings.Split(tx, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") && !units[l] {
				t.Fatalf("line not from the corpus: %q", l)
			}
		}
		for _, ch := range chunk.Split(tx, chunk.Options{}) {
			sizes = append(sizes, chunk.EstimateTokens(ch.Text))
		}
	}
	big := 0
	for _, s := range sizes {
		if s >= 200 {
			big++
		}
	}
	if big*10 < len(sizes)*7 {
		t.Errorf("only %d of %d chunks have ≥ 200 estimated tokens", big, len(sizes))
	}
}
