package memory

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

func TestRankingDefaultsAndValidation(t *testing.T) {
	lexical := embed.NewBuiltin(embed.BuiltinOptions{})
	var r Ranking
	if err := r.resolve(lexical); err != nil {
		t.Fatal(err)
	}
	if r.VectorWeight != LexicalVectorWeight || r.MMRLambda != DefaultMMRLambda || r.HalfLifeDays != DefaultHalfLifeDays || r.MMR || r.TemporalDecay || r.Now == nil {
		t.Fatalf("defaults for builtin: %+v", r)
	}
	// A semantic embedder (no Lexical method) gets the SPEC's 0.7.
	var s Ranking
	if err := s.resolve(struct{ embed.Embedder }{lexical}); err != nil {
		t.Fatal(err)
	}
	if s.VectorWeight != index.VectorWeight {
		t.Fatalf("semantic default weight %v, want %v", s.VectorWeight, index.VectorWeight)
	}
	for _, bad := range []Ranking{{VectorWeight: -0.1}, {VectorWeight: 1.5}, {VectorWeight: math.NaN()}, {MMRLambda: 2}, {HalfLifeDays: -1}, {HalfLifeDays: math.Inf(1)}} {
		if err := bad.resolve(lexical); err == nil {
			t.Errorf("resolve(%+v) accepted", bad)
		}
	}
	if _, err := Open(Options{Workspace: t.TempDir(), IndexDir: t.TempDir(), Ranking: Ranking{VectorWeight: 3}, Logger: quietLogger()}); err == nil {
		t.Fatal("Open accepted vectorWeight 3")
	}
}

func TestLogDateAndDecay(t *testing.T) {
	now := time.Date(2024, 6, 30, 12, 0, 0, 0, time.UTC)
	r := Ranking{TemporalDecay: true}
	if err := r.resolve(embed.NewBuiltin(embed.BuiltinOptions{})); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		want float64
	}{
		{"MEMORY.md", 1},                                // never decays
		{"memory/projects/search.md", 1},                // undated
		{"memory/2024-06-30.md", 1},                     // today (12 h: age < 1 day, still < 1)
		{"memory/2024-05-31.md", math.Exp2(-30.5 / 30)}, // one half-life and a half day
		{"memory/roles/writer/2024-04-01-standup.md", math.Exp2(-90.5 / 30)},
		{"memory/2025-01-01.md", 1}, // future: no boost, no decay
		{"memory/2024-13-01.md", 1}, // not a date
		{"2024-05-31.md", 1},        // not under memory/
	}
	for _, c := range cases {
		got := r.decay(c.path, now)
		if c.path == "memory/2024-06-30.md" {
			if got > 1 || got < math.Exp2(-1.0/30) {
				t.Errorf("decay(%s) = %v", c.path, got)
			}
			continue
		}
		if math.Abs(got-c.want) > 1e-12 {
			t.Errorf("decay(%s) = %v, want %v", c.path, got, c.want)
		}
	}
}

func TestRerankDecayAndMMR(t *testing.T) {
	hits := []index.Hit{
		{Path: "memory/2024-01-01.md", Text: "deploy the gateway with blue green release", Score: 0.9},
		{Path: "memory/2024-01-02.md", Text: "deploy the gateway with blue green release", Score: 0.89},
		{Path: "memory/2024-06-29.md", Text: "gateway deploy checklist: canary first", Score: 0.6},
		{Path: "MEMORY.md", Text: "the gateway runs on port 18789", Score: 0.5},
	}
	now := time.Date(2024, 6, 30, 0, 0, 0, 0, time.UTC)
	plain := Ranking{}
	got := plain.rerank(slices.Clone(hits), 3)
	// The exact copy of the first hit is folded into it.
	if len(got) != 3 || got[0].Path != hits[0].Path || got[1].Path != hits[2].Path || got[2].Path != hits[3].Path {
		t.Fatalf("plain ranking: %v", pathsOf(got))
	}
	if !slices.Equal(got[0].AlsoIn, []string{"memory/2024-01-02.md"}) {
		t.Fatalf("alsoIn = %v", got[0].AlsoIn)
	}

	decay := Ranking{TemporalDecay: true, HalfLifeDays: 30, Now: func() time.Time { return now }}
	hits[1].Text = "deploy the gateway with a blue green release on friday"
	got = decay.rerank(slices.Clone(hits), 4)
	// Six-month-old logs (0.9·2^-6) fall below yesterday's (0.6·0.98) and the
	// undated MEMORY.md (0.5); of the two, the newer wins by a day's decay
	// (0.89·2^(-180/30) > 0.9·2^(-181/30)).
	if got[0].Path != "memory/2024-06-29.md" || got[1].Path != "MEMORY.md" || got[2].Path != "memory/2024-01-02.md" {
		t.Fatalf("decay order: %v", pathsOf(got))
	}
	if got[0].Score != 0.6 {
		t.Fatalf("decay changed the reported score: %v", got[0].Score)
	}
	if plain.poolFor(6) != 10 || plain.poolFor(40) != 60 || plain.poolFor(MaxMaxResults) != MaxMaxResults ||
		decay.poolFor(6) != 50 || decay.poolFor(20) != 80 || decay.poolFor(MaxMaxResults) != MaxMaxResults {
		t.Fatalf("pool sizes plain %d %d, decay %d %d %d", plain.poolFor(6), plain.poolFor(40), decay.poolFor(6), decay.poolFor(20), decay.poolFor(MaxMaxResults))
	}

	mmr := Ranking{MMR: true, MMRLambda: 0.7}
	got = mmr.rerank(slices.Clone(hits), 3)
	// The first result is always the best-scoring one. The near copy of it
	// (similarity 0.7, below the fold threshold) keeps second place at
	// λ 0.7 (0.7·0.89 − 0.3·0.7 = 0.413 > 0.7·0.6 − 0.3·0.2 = 0.36) but
	// loses it at λ 0.3 (0.267 − 0.49 < 0.18 − 0.14).
	if got[0].Path != hits[0].Path || got[1].Path != hits[1].Path {
		t.Fatalf("mmr order: %v", pathsOf(got))
	}
	strong := Ranking{MMR: true, MMRLambda: 0.3}
	if got := strong.rerank(slices.Clone(hits), 3); got[0].Path != hits[0].Path || got[1].Path != hits[2].Path {
		t.Fatalf("mmr λ=0.3 order: %v", pathsOf(got))
	}
	// λ = 1 is relevance only.
	rel := Ranking{MMR: true, MMRLambda: 1}
	if got := rel.rerank(slices.Clone(hits), 4); got[1].Path != hits[1].Path {
		t.Fatalf("mmr λ=1 order: %v", pathsOf(got))
	}
}

func TestWordSetAndJaccard(t *testing.T) {
	a := wordSet("Deploy the gateway, 部署网关")
	for _, w := range []string{"deploy", "the", "gateway", "部", "部署", "网关", "关"} {
		if !a.has(w) {
			t.Errorf("wordSet lacks %q: %v", w, a)
		}
	}
	if j := jaccard(a, a); j != 1 {
		t.Errorf("jaccard(a,a) = %v", j)
	}
	if j := jaccard(wordSet("alpha beta"), wordSet("gamma delta")); j != 0 {
		t.Errorf("disjoint jaccard = %v", j)
	}
	if j := jaccard(wordSet(""), wordSet("")); j != 0 {
		t.Errorf("empty jaccard = %v", j)
	}
	// jaccardAtLeast agrees with jaccard at the threshold, for sets of
	// every size relation (its shortcuts must not change a decision).
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 2000; i++ {
		var x, y []string
		for w := 0; w < rng.Intn(30); w++ {
			x = append(x, fmt.Sprint("w", rng.Intn(40)))
		}
		for w := 0; w < rng.Intn(30); w++ {
			y = append(y, fmt.Sprint("w", rng.Intn(40)))
		}
		if rng.Intn(2) == 0 {
			y = append(slices.Clone(x), y[:min(len(y), 2)]...)
		}
		a, b := wordSet(strings.Join(x, " ")), wordSet(strings.Join(y, " "))
		for _, th := range []float64{0.5, 0.8, 1} {
			if got, want := jaccardAtLeast(a, b, th), jaccard(a, b) >= th; got != want {
				t.Fatalf("jaccardAtLeast(%v, %v, %v) = %v, jaccard %v", x, y, th, got, jaccard(a, b))
			}
		}
	}
}

// Through the Manager: MMR and decay re-rank real search results, and the
// first result of a plain search is independent of maxResults.
func TestSearchWithRankingOptions(t *testing.T) {
	files := map[string]string{
		"memory/2020-01-01.md": "Release checklist: run the migration dry-run before the canary deploy.\n",
		"memory/2024-06-01.md": "Release checklist: run the migration dry-run before the canary deploy, then tag.\n",
		"MEMORY.md":            "# Memory\n\nRelease checklist lives in docs/release.md.\n",
	}
	now := time.Date(2024, 6, 2, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, files, func(o *Options) {
		o.Ranking = Ranking{TemporalDecay: true, Now: func() time.Time { return now }}
	})
	ctx := context.Background()
	if err := f.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := f.m.Search(ctx, SearchOptions{Query: "release checklist migration dry-run canary", MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) < 2 || res.Results[0].Path != "memory/2024-06-01.md" {
		t.Fatalf("with decay the recent log comes first: %+v", res.Results)
	}
}

func pathsOf(hits []index.Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Path)
	}
	return out
}
