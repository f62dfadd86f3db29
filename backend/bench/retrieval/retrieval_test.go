package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory"
)

// run runs the harness on a testdata set with temp files under t.TempDir().
func run(t *testing.T, o Options) Report {
	t.Helper()
	o.TempDir = t.TempDir()
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run(%s): %v", o.Set, err)
	}
	left, _ := os.ReadDir(o.TempDir)
	if len(left) != 0 {
		t.Errorf("Run left %d entries in TempDir", len(left))
	}
	return rep
}

// TestMiniSet runs the tiny English + Chinese BEIR set through the real
// Manager in every mode.
func TestMiniSet(t *testing.T) {
	rep := run(t, Options{Set: "testdata/mini"})
	// q7 has no judgment (skipped), q8 is an abstention (excluded).
	if rep.Kind != "beir" || rep.Level != "doc" || rep.Qrels != "qrels.tsv" || rep.Set != "mini" {
		t.Errorf("set %q kind %q level %q qrels %q", rep.Set, rep.Kind, rep.Level, rep.Qrels)
	}
	if rep.Queries != 7 || rep.SkippedQueries != 1 || rep.ExcludedQueries != 1 || rep.MissingJudged != 0 {
		t.Errorf("queries %d skipped %d excluded %d missing %d, want 7 1 1 0", rep.Queries, rep.SkippedQueries, rep.ExcludedQueries, rep.MissingJudged)
	}
	if rep.Docs != 7 || rep.Partitions != 1 || rep.Depth != memory.MaxMaxResults {
		t.Errorf("docs %d partitions %d depth %d", rep.Docs, rep.Partitions, rep.Depth)
	}
	if rep.Index.Chunks < 7 || rep.Index.Seconds <= 0 || rep.Index.ChunksPerSecond <= 0 || rep.RSSBytes <= 0 {
		t.Errorf("index %+v rss %d", rep.Index, rep.RSSBytes)
	}
	if got := rep.ModeOrder(); !slices.Equal(got, []string{"keyword", "vector", "hybrid"}) {
		t.Fatalf("modes %v", got)
	}
	kw, vec, hy := rep.Modes["keyword"], rep.Modes["vector"], rep.Modes["hybrid"]
	// "poolside" shares no term with any document: the keyword leg finds
	// nothing; the English q2 finds its English document but not the
	// Chinese one also judged (recall 1/2); every other query has its
	// words in its document. Without a score floor the vector leg ranks
	// all 7 documents.
	if !near(kw.Recall10, 5.5/7) || !near(kw.Any10, 6.0/7) {
		t.Errorf("keyword R@10 %.4f any@10 %.4f, want 5.5/7 and 6/7", kw.Recall10, kw.Any10)
	}
	if vec.Recall10 != 1 || hy.Recall10 != 1 {
		t.Errorf("R@10 vector %.4f hybrid %.4f, want 1", vec.Recall10, hy.Recall10)
	}
	if hy.MRR < 0.8 || hy.NDCG10 < 0.8 || hy.Recall1 < 0.6 {
		t.Errorf("hybrid too weak on an easy set: %+v", hy)
	}
	if hy.P50ms <= 0 || hy.P99ms < hy.P50ms || rep.Query != hy.Latency {
		t.Errorf("latency hybrid %+v, top %+v", hy.Latency, rep.Query)
	}

	// --limit and --modes.
	small := run(t, Options{Set: "testdata/mini", Limit: 2, Modes: []string{"hybrid", "keyword", "hybrid"}})
	if small.Queries != 2 || !slices.Equal(small.ModeOrder(), []string{"keyword", "hybrid"}) {
		t.Errorf("limit 2, modes hybrid,keyword: %d queries, modes %v", small.Queries, small.ModeOrder())
	}
	if small.Query != small.Modes["hybrid"].Latency {
		t.Error("top-level latency is not the hybrid's")
	}
	// Concurrent searches give the same figures.
	par := run(t, Options{Set: "testdata/mini", Workers: 3})
	if par.Workers != 3 || par.Queries != rep.Queries {
		t.Errorf("workers 3: workers %d queries %d", par.Workers, par.Queries)
	}
	for _, m := range rep.ModeOrder() {
		if par.Modes[m].Quality != rep.Modes[m].Quality {
			t.Errorf("mode %s: workers 3 %+v, workers 1 %+v", m, par.Modes[m].Quality, rep.Modes[m].Quality)
		}
	}
	kwOnly := run(t, Options{Set: "testdata/mini", Modes: []string{"keyword"}})
	if kwOnly.Query != kwOnly.Modes["keyword"].Latency || kwOnly.Modes["keyword"].Recall10 != kw.Recall10 {
		t.Errorf("keyword-only run %+v differs from the keyword row %+v", kwOnly.Modes["keyword"], kw)
	}
}

// TestReportJSON checks the JSON schema of the issue, key by key.
func TestReportJSON(t *testing.T) {
	rep := run(t, Options{Set: "testdata/mini", Limit: 3})
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"set", "queries", "modes", "index", "query", "rssBytes"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("missing %q in %s", k, data)
		}
	}
	modes, _ := obj["modes"].(map[string]any)
	for _, m := range []string{"keyword", "vector", "hybrid"} {
		mm, _ := modes[m].(map[string]any)
		for _, k := range []string{"recall@1", "recall@5", "recall@10", "ndcg@10", "mrr"} {
			if _, ok := mm[k].(float64); !ok {
				t.Errorf("modes.%s.%s missing or not a number", m, k)
			}
		}
	}
	index, _ := obj["index"].(map[string]any)
	for _, k := range []string{"seconds", "chunks", "chunksPerSecond"} {
		if _, ok := index[k].(float64); !ok {
			t.Errorf("index.%s missing", k)
		}
	}
	q, _ := obj["query"].(map[string]any)
	for _, k := range []string{"p50ms", "p99ms"} {
		if _, ok := q[k].(float64); !ok {
			t.Errorf("query.%s missing", k)
		}
	}
	if _, ok := obj["groups"]; ok {
		t.Error("groups present although no query names a group")
	}
	if obj["queries"] != float64(3) {
		t.Errorf("queries = %v", obj["queries"])
	}

	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Set mini", "keyword", "vector", "hybrid", "nDCG@10", "Index:", "Query: p50", "RSS peak:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPartitionsAndSessions loads the LoCoMo-shaped set: one partition per
// conversation, category 5 excluded, a query without evidence skipped, and
// with session qrels the turns grouped into session documents in turn
// order.
func TestPartitionsAndSessions(t *testing.T) {
	o, err := Options{Set: "testdata/locomo-mini"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare(o)
	if err != nil {
		t.Fatal(err)
	}
	if p.level != "doc" || len(p.parts) != 2 || p.excluded != 1 || p.skipped != 1 {
		t.Fatalf("level %q, %d partitions, excluded %d, skipped %d", p.level, len(p.parts), p.excluded, p.skipped)
	}
	for _, part := range p.parts {
		for _, d := range part.docs {
			if !strings.HasPrefix(d.id, part.name+":") {
				t.Errorf("partition %s holds %s", part.name, d.id)
			}
		}
		for _, q := range part.queries {
			if !strings.HasPrefix(q.id, part.name+":") {
				t.Errorf("partition %s runs %s", part.name, q.id)
			}
		}
	}
	if got := p.parts[0].docs[0].text; got != "# 1:00 pm on 8 May, 2023\n\nAlice: I adopted a puppy named Biscuit last week.\n" {
		t.Errorf("turn document:\n%s", got)
	}

	o.Qrels = "qrels_session.tsv"
	p, err = prepare(o)
	if err != nil {
		t.Fatal(err)
	}
	if p.level != "session" || len(p.parts) != 2 {
		t.Fatalf("session qrels: level %q, %d partitions", p.level, len(p.parts))
	}
	a := p.parts[0]
	var ids []string
	for _, d := range a.docs {
		ids = append(ids, d.id)
	}
	if !slices.Equal(ids, []string{"conv-a:session_1", "conv-a:session_2"}) {
		t.Fatalf("conv-a session docs %v", ids)
	}
	want := "# 1:00 pm on 8 May, 2023\n\nAlice: I adopted a puppy named Biscuit last week.\nBob: That's lovely! What breed is Biscuit?\nAlice: Biscuit is a corgi and very playful.\n"
	if a.docs[0].text != want {
		t.Errorf("session document:\n%s\nwant:\n%s", a.docs[0].text, want)
	}
}

// TestLoCoMoShapedRuns runs the LoCoMo-shaped set end to end at turn and
// session level and as Markdown workspaces.
func TestLoCoMoShapedRuns(t *testing.T) {
	tests := []struct {
		name       string
		o          Options
		kind       string
		level      string
		docs       int
		minHybridR float64 // hybrid Recall@5 at least
	}{
		{"turns", Options{Set: "testdata/locomo-mini"}, "beir", "doc", 10, 1},
		{"sessions", Options{Set: "testdata/locomo-mini", Qrels: "qrels_session.tsv"}, "beir", "session", 4, 1},
		{"workspaces", Options{Set: "testdata/locomo-mini/workspaces"}, "workspaces", "turn", 10, 1},
		{"workspaces option", Options{Set: "testdata/locomo-mini", Workspaces: "testdata/locomo-mini/workspaces"}, "workspaces", "turn", 10, 1},
		{"workspaces, session qrels", Options{Set: "testdata/locomo-mini/workspaces", Qrels: "qrels_session.tsv"}, "workspaces", "session", 4, 1},
		{"all categories", Options{Set: "testdata/locomo-mini", Categories: []int{1, 2, 3, 4, 5}}, "beir", "doc", 10, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, tc.o)
			wantQ, wantEx := 4, 1
			if len(tc.o.Categories) == 5 {
				wantQ, wantEx = 5, 0
			}
			if rep.Kind != tc.kind || rep.Level != tc.level || rep.Docs != tc.docs || rep.Partitions != 2 ||
				rep.Queries != wantQ || rep.ExcludedQueries != wantEx || rep.SkippedQueries != 1 || rep.MissingJudged != 0 {
				t.Fatalf("kind %s level %s docs %d partitions %d queries %d excluded %d skipped %d missing %d",
					rep.Kind, rep.Level, rep.Docs, rep.Partitions, rep.Queries, rep.ExcludedQueries, rep.SkippedQueries, rep.MissingJudged)
			}
			if hy := rep.Modes["hybrid"]; hy.Recall5 < tc.minHybridR {
				t.Errorf("hybrid %+v", hy)
			}
			// Groups: the categories, each with its share of the queries.
			wantGroups := map[string]int{"category 1": 1, "category 2": 1, "category 4": 2}
			if len(tc.o.Categories) == 5 {
				wantGroups["category 5"] = 1
			}
			if len(rep.Groups) != len(wantGroups) {
				t.Fatalf("groups %v, want %v", rep.Groups, wantGroups)
			}
			for g, n := range wantGroups {
				for _, m := range rep.ModeOrder() {
					if q := rep.Groups[g][m]; q.N != n {
						t.Errorf("group %s mode %s: n %d, want %d", g, m, q.N, n)
					}
				}
			}
			// The groups partition the queries: their n-weighted mean is the total.
			for _, m := range rep.ModeOrder() {
				var sum float64
				for g := range wantGroups {
					sum += float64(rep.Groups[g][m].N) * rep.Groups[g][m].NDCG10
				}
				if all := rep.Modes[m].NDCG10; !near(sum/float64(rep.Queries), all) {
					t.Errorf("mode %s: groups' nDCG@10 average %.4f, total %.4f", m, sum/float64(rep.Queries), all)
				}
			}
		})
	}
}

// TestRankWorkspaceTags: chunk results become the turn ids of their tags,
// in text order, first occurrence kept, only within the chunk's lines.
func TestRankWorkspaceTags(t *testing.T) {
	lines := map[string][]string{
		"memory/2023-05-08.md": {"# 2023-05-08", "", "- [D1:1] A: hi", "- [D1:2] B: hello [D1:1]", "- [D1:3] A: bye"},
		"memory/2023-05-20.md": {"# 2023-05-20", "- [D2:1] A: again", "- [D2:2] B: yes"},
	}
	tests := []struct {
		name    string
		session bool
		res     []memory.SearchResult
		want    []string
	}{
		{"lines of one chunk", false, []memory.SearchResult{{Path: "memory/2023-05-08.md", StartLine: 4, EndLine: 5}},
			[]string{"c:D1:2", "c:D1:1", "c:D1:3"}},
		{"two chunks, repeats dropped", false, []memory.SearchResult{
			{Path: "memory/2023-05-20.md", StartLine: 1, EndLine: 3},
			{Path: "memory/2023-05-08.md", StartLine: 1, EndLine: 5},
			{Path: "memory/2023-05-20.md", StartLine: 2, EndLine: 2},
		}, []string{"c:D2:1", "c:D2:2", "c:D1:1", "c:D1:2", "c:D1:3"}},
		{"sessions", true, []memory.SearchResult{
			{Path: "memory/2023-05-20.md", StartLine: 1, EndLine: 3},
			{Path: "memory/2023-05-08.md", StartLine: 1, EndLine: 5},
		}, []string{"c:session_2", "c:session_1"}},
		{"end past the file, unknown file", false, []memory.SearchResult{
			{Path: "memory/gone.md", StartLine: 1, EndLine: 9},
			{Path: "memory/2023-05-08.md", StartLine: 5, EndLine: 99},
		}, []string{"c:D1:3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			part := &partition{name: "c", lines: lines, session: tc.session}
			if got := part.rank(tc.res); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	// Documents: one id per file, first occurrence.
	part := &partition{paths: map[string]string{"memory/a.md": "A", "memory/b.md": "B"}}
	got := part.rank([]memory.SearchResult{{Path: "memory/b.md"}, {Path: "memory/a.md"}, {Path: "memory/b.md"}, {Path: "memory/x.md"}})
	if !slices.Equal(got, []string{"B", "A"}) {
		t.Errorf("documents: got %v", got)
	}
}

func TestSafeName(t *testing.T) {
	used := map[string]bool{}
	tests := []struct{ id, want string }{
		{"conv-26:D1:3", "conv-26_D1_3"},
		{"DEV_0", "DEV_0"},
		{".hidden", "_.hidden"},
		{"a/b", "a_b"},
		{"a:b", "a_b~2"},
		{"A_B", "A_B~3"}, // case-insensitive file systems
		{"数据", "__"},
	}
	for _, tc := range tests {
		if got := safeName(tc.id, used); got != tc.want {
			t.Errorf("safeName(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	empty := t.TempDir()
	noQueries := t.TempDir()
	if err := os.WriteFile(filepath.Join(noQueries, "corpus.jsonl"), []byte(`{"_id":"a","text":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    Options
		is   error
		msg  string
	}{
		{"no set", Options{}, ErrInvalidOptions, "Set is required"},
		{"missing folder", Options{Set: filepath.Join(empty, "nope")}, ErrInvalidSet, "is not a folder"},
		{"no corpus", Options{Set: empty}, ErrInvalidSet, "no corpus*.jsonl in"},
		{"no queries", Options{Set: noQueries}, ErrInvalidSet, "no queries.jsonl or questions.jsonl"},
		{"missing qrels", Options{Set: "testdata/mini", Qrels: "qrels_nope.tsv"}, ErrInvalidSet, "qrels_nope.tsv"},
		{"unknown mode", Options{Set: "testdata/mini", Modes: []string{"semantic"}}, ErrInvalidOptions, `unknown mode "semantic"`},
		{"depth too big", Options{Set: "testdata/mini", Depth: memory.MaxMaxResults + 1}, ErrInvalidOptions, "Depth"},
		{"negative limit", Options{Set: "testdata/mini", Limit: -1}, ErrInvalidOptions, "Limit"},
		{"negative workers", Options{Set: "testdata/mini", Workers: -2}, ErrInvalidOptions, "Workers"},
		{"qrels matching nothing", Options{Set: "testdata/mini", Qrels: "testdata/locomo-mini/qrels.tsv"}, ErrInvalidSet, "is a corpus id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.TempDir = t.TempDir()
			_, err := Run(context.Background(), tc.o)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want %v containing %q", err, tc.is, tc.msg)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{Set: "testdata/mini", TempDir: t.TempDir(), Workers: 2}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// corporaDir returns shared/corpora beside the repository (or
// $ATRIUM_CORPORA), skipping the test when it is absent.
func corporaDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("ATRIUM_CORPORA")
	if d == "" {
		d = filepath.Join("..", "..", "..", "..", "shared", "corpora")
	}
	d, err := filepath.Abs(d)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		t.Skipf("corpora not found at %s (expected shared/corpora beside the repository, or set ATRIUM_CORPORA); skipping", d)
	}
	return d
}

// TestCMRC runs the first 50 CMRC 2018 questions against all 848
// paragraphs. BM25 is near the ceiling on this set (BASELINES.md: nDCG@10
// 0.986), so the hybrid must be too.
func TestCMRC(t *testing.T) {
	dir := filepath.Join(corporaDir(t), "bench", "cmrc2018")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no CMRC 2018 set at %s; skipping", dir)
	}
	rep := run(t, Options{Set: dir, Limit: 50, Modes: []string{"keyword", "hybrid"}})
	if rep.Queries != 50 || rep.Docs != 848 || rep.MissingJudged != 0 {
		t.Fatalf("queries %d docs %d missing %d", rep.Queries, rep.Docs, rep.MissingJudged)
	}
	for _, m := range []string{"keyword", "hybrid"} {
		x := rep.Modes[m]
		if x.NDCG10 <= 0.9 || x.Recall10 <= 0.9 || x.MRR <= 0.85 {
			t.Errorf("%s on CMRC: %+v", m, x)
		}
	}
}
