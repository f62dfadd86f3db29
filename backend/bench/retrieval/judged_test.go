package retrieval

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory"
)

// TestJudgedSet runs the tiny judged set (questions judged by path and line
// span over workspaces indexed as they are): one partition per workspace,
// the absent questions asked in their own workspace, the held-out figures
// by group.
func TestJudgedSet(t *testing.T) {
	rep := run(t, Options{Set: "testdata/judged-mini", Workspaces: "testdata/judged-mini/workspaces", Modes: []string{"hybrid"}})
	if rep.Kind != "judged" || rep.Level != "span" || rep.Queries != 5 || rep.Partitions != 2 || rep.MissingJudged != 0 {
		t.Fatalf("report %+v", rep)
	}
	d := rep.Defaults
	if d == nil || d.Absent.N != 2 || d.All.N != 5 {
		t.Fatalf("defaults %+v", d)
	}
	if d.All.NoFloorHit5 < 4.0/5 {
		t.Errorf("no floor found %.2f of the questions in the top 5, want ≥ 0.8", d.All.NoFloorHit5)
	}
	n := 0
	for g, a := range d.Groups {
		if g != "paraphrase en" && g != "direct en" && g != "direct zh-Hant" {
			t.Errorf("unexpected group %q", g)
		}
		n += a.N
	}
	if n != d.HeldOut.N {
		t.Errorf("groups hold %d questions, the held-out half %d", n, d.HeldOut.N)
	}
}

// TestJudgedSetErrors: a judged set without its workspaces folder, or with
// a question naming a workspace that is not there, is ErrInvalidSet.
func TestJudgedSetErrors(t *testing.T) {
	_, err := prepare(Options{Set: "testdata/judged-mini"})
	if !errors.Is(err, ErrInvalidSet) {
		t.Errorf("no workspaces: %v", err)
	}
	dir := t.TempDir()
	line := `{"_id": "x", "workspace": "nowhere", "text": "q", "type": "fact", "answers": [{"path": "memory/a.md", "start": 1, "end": 2}]}`
	if err := os.WriteFile(filepath.Join(dir, JudgedFile), []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prepare(Options{Set: dir, Workspaces: "testdata/judged-mini/workspaces"}); !errors.Is(err, ErrInvalidSet) {
		t.Errorf("unknown workspace: %v", err)
	}
}

// TestRankJudgedSpans: a chunk counts for every judged span its lines
// overlap; a chunk overlapping none still takes its rank.
func TestRankJudgedSpans(t *testing.T) {
	a, b := span{"memory/a.md", 3, 7}, span{"memory/a.md", 9, 9}
	part := &partition{name: "w", spans: map[string][]span{"memory/a.md": {a, b}}}
	got := part.rank([]memory.SearchResult{
		{Path: "memory/b.md", StartLine: 3, EndLine: 7},
		{Path: "memory/a.md", StartLine: 7, EndLine: 12},
		{Path: "memory/a.md", StartLine: 1, EndLine: 2},
		{Path: "memory/a.md", StartLine: 1, EndLine: 4},
	})
	want := []string{"chunk memory/b.md:3-7", a.id("w"), b.id("w"), "chunk memory/a.md:1-2"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
