package memory

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// judgedQuestion is one line of the judged OpenClaw questions
// (backend/bench/retrieval/testdata/openclaw-judged/judged.jsonl).
type judgedQuestion struct {
	ID, Workspace, Text, Type string
	Paraphrase                bool
	Answers                   []struct {
		Path       string
		Start, End int
	}
}

func judgedQuestions(t *testing.T, workspace string) []judgedQuestion {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "bench", "retrieval", "testdata", "openclaw-judged", "judged.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []judgedQuestion
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var q judgedQuestion
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			t.Fatal(err)
		}
		if q.Workspace == workspace {
			out = append(out, q)
		}
	}
	return out
}

// TestPeopleQuestionsDefaults asks the judged questions of the scchin
// workspace (zh-Hant, written by people in their own words, issue 25) with
// the defaults: a question whose answer is in the top 5 with no floor is
// not answered with nothing (before issue 25 the floor of a long question
// emptied five of them), and a question about something the workspace does
// not hold comes back "low" — nothing, or results marked weak.
func TestPeopleQuestionsDefaults(t *testing.T) {
	const ws = "scchin-openclaw-workspace"
	dir := filepath.Join(corporaDir(t), "workspaces", ws)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("workspace %s not found; skipping", dir)
	}
	m, err := Open(Options{Workspace: dir, IndexDir: filepath.Join(t.TempDir(), "index"), DisableWatcher: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	qs := judgedQuestions(t, ws)
	checked, absent := 0, 0
	for _, q := range qs {
		def, err := m.Search(ctx, SearchOptions{Query: q.Text})
		if err != nil {
			t.Fatal(err)
		}
		if q.Type == "absent" {
			absent++
			if def.Confidence.Level != ConfidenceLow {
				t.Errorf("%s %q (absent): confidence %+v with %d results, want low", q.ID, q.Text, def.Confidence, len(def.Results))
			}
			continue
		}
		nf, err := m.Search(ctx, SearchOptions{Query: q.Text, MinScore: -1})
		if err != nil {
			t.Fatal(err)
		}
		if !answersIn(nf.Results, q, 5) {
			continue
		}
		checked++
		if len(def.Results) == 0 {
			t.Errorf("%s %q (paraphrase %v): nothing with the defaults, although the answer is in the top 5 with no floor (best score %.4f)", q.ID, q.Text, q.Paraphrase, nf.Results[0].Score)
		} else if !answersIn(def.Results, q, 5) {
			t.Errorf("%s %q: the defaults lost the answer the no-floor search has in its top 5", q.ID, q.Text)
		}
	}
	if checked < 10 || absent < 4 {
		t.Fatalf("checked %d answerable and %d absent questions; the set changed?", checked, absent)
	}
}

// answersIn reports whether one of the first k results overlaps a judged
// answer of q.
func answersIn(res []SearchResult, q judgedQuestion, k int) bool {
	for _, r := range res[:min(k, len(res))] {
		for _, a := range q.Answers {
			if r.Path == a.Path && r.StartLine <= a.End && a.Start <= r.EndLine {
				return true
			}
		}
	}
	return false
}
