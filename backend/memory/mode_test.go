package memory

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// switchEmbedder is the builtin embedder that fails while fail is set.
type switchEmbedder struct {
	embed.Embedder
	fail atomic.Bool
}

var errEmbedDown = errors.New("embedder down")

func (s *switchEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if s.fail.Load() {
		return nil, errEmbedDown
	}
	return s.Embedder.Embed(ctx, texts)
}

func modeFiles() map[string]string {
	return map[string]string{
		"memory/pool.md":    "# Database\n\nConnection pooling settings: at most 20 connections per worker.\n",
		"memory/ticket.md":  "# Tickets\n\nTicket QK-7731 was closed after the deploy.\n",
		"memory/vector.md":  "# 决定\n\n我们决定使用向量数据库来存储长期记忆。\n",
		"memory/weather.md": "# Hike\n\nThe weather was sunny on the hike to the lake.\n",
	}
}

// TestSearchModes checks each SearchOptions.Mode against the same index:
// the keyword leg alone misses a sub-word match that the vector leg alone
// finds, both find exact words, the hybrid is the default, and the scores
// stay within what one leg can give with the builtin (lexical) embedder:
// (1−0.3)·k + phrase bonus; a vector-only score is the cosine.
func TestSearchModes(t *testing.T) {
	f := newFixture(t, modeFiles(), nil)
	f.sync(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		query    string
		mode     string
		first    string // "" = no results
		maxScore float64
	}{
		{"keyword misses a sub-word", "poolside", ModeKeyword, "", 1},
		{"vector finds a sub-word", "poolside", ModeVector, "memory/pool.md", 1},
		{"hybrid finds a sub-word", "poolside", ModeHybrid, "memory/pool.md", 1},
		{"default is hybrid", "poolside", "", "memory/pool.md", 1},
		{"keyword identifier", "QK-7731", ModeKeyword, "memory/ticket.md", 1 - LexicalVectorWeight + 0.1},
		{"vector identifier", "QK-7731", ModeVector, "memory/ticket.md", 1},
		{"keyword Chinese", "向量数据库", ModeKeyword, "memory/vector.md", 1 - LexicalVectorWeight + 0.1},
		{"vector Chinese", "向量数据库", ModeVector, "memory/vector.md", 1},
		{"hybrid Chinese", "向量数据库", ModeHybrid, "memory/vector.md", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := f.m.Search(ctx, SearchOptions{Query: tc.query, Mode: tc.mode, MinScore: 1e-9, MaxResults: 10})
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if tc.first == "" {
				if len(res.Results) != 0 {
					t.Fatalf("want no results, got %v", resultPaths(res.Results))
				}
				return
			}
			if len(res.Results) == 0 || res.Results[0].Path != tc.first {
				t.Fatalf("want %s first, got %v", tc.first, resultPaths(res.Results))
			}
			for _, r := range res.Results {
				if r.Score > tc.maxScore+1e-9 {
					t.Errorf("%s scored %.4f, above %.2f for mode %q", r.Path, r.Score, tc.maxScore, tc.mode)
				}
			}
		})
	}

	// The default mode is the hybrid, result for result.
	a, err := f.m.Search(ctx, SearchOptions{Query: "connection settings 数据库", MinScore: -1, MaxResults: 10})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.m.Search(ctx, SearchOptions{Query: "connection settings 数据库", MinScore: -1, MaxResults: 10, Mode: ModeHybrid})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Results) == 0 || len(a.Results) != len(b.Results) {
		t.Fatalf("default %v, hybrid %v", resultPaths(a.Results), resultPaths(b.Results))
	}
	for i := range a.Results {
		if a.Results[i].Path != b.Results[i].Path || a.Results[i].Score != b.Results[i].Score {
			t.Fatalf("default and hybrid differ at %d: %+v / %+v", i, a.Results[i], b.Results[i])
		}
	}

	// The keyword mode does not embed the query.
	before := f.emb.calls.Load()
	if _, err := f.m.Search(ctx, SearchOptions{Query: "weather", Mode: ModeKeyword}); err != nil {
		t.Fatal(err)
	}
	if got := f.emb.calls.Load(); got != before {
		t.Errorf("keyword mode embedded the query (%d embed calls)", got-before)
	}

	// An unknown mode is invalid input.
	if _, err := f.m.Search(ctx, SearchOptions{Query: "weather", Mode: "semantic"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("mode semantic: got %v, want ErrInvalidInput", err)
	}
}

// TestSearchModeEmbedderDown: without a query embedding the hybrid falls
// back to the keyword leg, while the vector mode reports the error.
func TestSearchModeEmbedderDown(t *testing.T) {
	emb := &switchEmbedder{Embedder: embed.NewBuiltin(embed.BuiltinOptions{})}
	f := newFixture(t, modeFiles(), func(o *Options) { o.Embedder = emb })
	f.sync(t)
	emb.fail.Store(true)
	ctx := context.Background()
	res, err := f.m.Search(ctx, SearchOptions{Query: "QK-7731", Mode: ModeHybrid})
	if err != nil {
		t.Fatalf("hybrid with the embedder down: %v", err)
	}
	if !hasPath(res.Results, "memory/ticket.md") {
		t.Errorf("hybrid fallback: got %v, want memory/ticket.md", resultPaths(res.Results))
	}
	if _, err := f.m.Search(ctx, SearchOptions{Query: "QK-7731", Mode: ModeVector}); !errors.Is(err, errEmbedDown) {
		t.Errorf("vector with the embedder down: got %v, want the embedder's error", err)
	}
	if _, err := f.m.Search(ctx, SearchOptions{Query: "QK-7731", Mode: ModeKeyword}); err != nil {
		t.Errorf("keyword with the embedder down: %v", err)
	}
}

// A vector-only search scores by the cosine alone, so the default floor
// finds a close match with any embedder.
func TestVectorModeDefaultFloor(t *testing.T) {
	f := newFixture(t, modeFiles(), nil)
	f.sync(t)
	res, err := f.m.Search(context.Background(), SearchOptions{Query: "Connection pooling settings", Mode: ModeVector})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) == 0 || res.Results[0].Path != "memory/pool.md" || res.Results[0].Score < DefaultMinScore {
		t.Fatalf("vector mode at the default floor: %v", resultPaths(res.Results))
	}
}
