package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The known failure classes of memory search (issue 3 §3), each through the
// whole Manager with the app's default embedder and ranking. Classes 3, 5
// and 6 need a scripted embedding server: embed_provider_test.go
// (TestProviderDownKeywordOnlyThenRecovers, TestProviderDimsSwitchRebuildsWhileSearching,
// TestProviderLongChineseLineFitsInputLimit).

// Class 1: words in different chunks, queried together separated by spaces:
// the keyword leg ORs the terms and returns every chunk.
func TestClassTermsAreORed(t *testing.T) {
	f := newFixture(t, map[string]string{
		"memory/global/a.md": "# 甲\n\n我们讨论了向量数据库的索引方案。\n",
		"memory/global/b.md": "# 乙\n\n周五的团队午餐订在火锅店。\n",
		"memory/global/c.md": "# 丙\n\n下个季度的预算需要财务批准。\n",
		"memory/global/d.md": "# Unrelated\n\nThe ferry timetable changed in June.\n",
	}, nil)
	f.sync(t)
	for _, mode := range []string{ModeKeyword, ModeHybrid} {
		r, err := f.m.Search(context.Background(), SearchOptions{Query: "数据库 火锅 预算", Mode: mode, MinScore: -1})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range r.Results {
			got = append(got, x.Path)
		}
		for _, want := range []string{"memory/global/a.md", "memory/global/b.md", "memory/global/c.md"} {
			if !slices.Contains(got, want) {
				t.Errorf("%s: %s missing from %v", mode, want, got)
			}
		}
		if mode == ModeKeyword && slices.Contains(got, "memory/global/d.md") {
			t.Errorf("keyword leg returned a chunk without any query term: %v", got)
		}
	}
	// At the default floor too: a keyword-style query's space-separated
	// parts are alternatives (QA: a note holding one of two words vanished
	// once the other word was added), in Chinese and English, and a chunk
	// holding several parts still ranks first. Junk stays out.
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"数据库 火锅 预算", []string{"memory/global/a.md", "memory/global/b.md", "memory/global/c.md"}},
		{"ferry 火锅", []string{"memory/global/d.md", "memory/global/b.md"}},
		{"zebrafalcon timetable", []string{"memory/global/d.md"}},
	} {
		r, err := f.m.Search(context.Background(), SearchOptions{Query: tc.query})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, x := range r.Results {
			got = append(got, x.Path)
		}
		for _, want := range tc.want {
			if !slices.Contains(got, want) {
				t.Errorf("%q at the default floor: %s missing from %v", tc.query, want, got)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q at the default floor: %v, want exactly %v", tc.query, got, tc.want)
		}
	}
	// A natural question is not a list of alternatives: one shared word
	// does not clear the floor.
	r, err := f.m.Search(context.Background(), SearchOptions{Query: "what is the budget of the ferry"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range r.Results {
		if x.Path == "memory/global/a.md" {
			t.Errorf("natural question: unrelated %s returned", x.Path)
		}
	}
}

// Class 2: a unique code in an otherwise unrelated note is found at the
// default minScore, in English and in Chinese surroundings, and in a long
// daily log where it is one line among many.
func TestClassUniqueIdentifierClearsDefaultFloor(t *testing.T) {
	var long strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&long, "- %02d:00 routine check of the backup job, nothing to report.\n", i%24)
	}
	long.WriteString("- ticket QK-7731 reopened by the auditor\n")
	f := newFixture(t, map[string]string{
		"memory/2024-05-01.md":          long.String(),
		"memory/global/zh.md":           "# 备忘\n\n工单 ZX-0042 已关闭。\n",
		"memory/global/other.md":        "# Ops\n\nThe backup job runs nightly; tickets are tracked in the tracker.\n",
		"memory/roles/main/timeline.md": "Reopened tickets need an owner within a day.\n",
	}, nil)
	f.sync(t)
	for q, want := range map[string]string{"QK-7731": "memory/2024-05-01.md", "qk-7731": "memory/2024-05-01.md", "ZX-0042": "memory/global/zh.md"} {
		rs := f.search(t, q) // default maxResults 6 and floor
		if len(rs) == 0 || rs[0].Path != want || rs[0].Score < DefaultMinScore {
			t.Errorf("%q: %v, want %s first above %v", q, rs, want, DefaultMinScore)
		}
	}
}

// Class 4: the watcher never runs; a new file is reported dirty by a
// status check and indexed by the periodic rescan.
func TestClassDeadWatcherRescanAndDirty(t *testing.T) {
	f := newFixture(t, baseFiles, func(o *Options) {
		o.DisableWatcher = true
		o.RescanInterval = 2 * time.Second
	})
	f.sync(t)
	writeFile(t, f.ws, "memory/2024-07-01.md", "The glassblower's kiln reached 1100 degrees.\n")
	if err := f.m.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := f.m.Status(); st.Dirty < 1 {
		t.Fatalf("a file the index has not seen is not dirty: %+v", st)
	}
	runManager(t, f.m)
	poll(t, "rescan to index the new file", 20*time.Second, func() bool {
		return hasPath(f.search(t, "glassblower kiln"), "memory/2024-07-01.md") && f.m.Status().Dirty == 0
	})
}

// Class 7: maxResults 1 and 5 (and 50) give the same first result, and the
// shorter list is a prefix of the longer, for assorted queries.
func TestClassFirstResultIndependentOfMaxResults(t *testing.T) {
	files := map[string]string{}
	words := []string{"gateway", "memory", "index", "search", "profile", "session", "token", "vector", "网关", "记忆", "索引", "搜索"}
	for i := 0; i < 120; i++ {
		var b strings.Builder
		for j := 0; j < 8; j++ {
			b.WriteString(words[(i*5+j*j+i/7)%len(words)])
			b.WriteByte(' ')
		}
		files[fmt.Sprintf("memory/notes/n%03d.md", i)] = b.String() + fmt.Sprintf("note %d\n", i)
	}
	f := newFixture(t, files, nil)
	f.sync(t)
	ctx := context.Background()
	// Scores are compared exactly: let the keyword index finish merging
	// first (index.Store.Compact; background merges move BM25 slightly).
	st, release, err := f.m.currentStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	release()
	for _, q := range []string{"gateway token", "memory index search", "网关 记忆", "vector", "note 17", "profile session 索引"} {
		var prev []SearchResult
		for _, n := range []int{1, 5, 50} {
			r, err := f.m.Search(ctx, SearchOptions{Query: q, MaxResults: n, MinScore: -1})
			if err != nil {
				t.Fatal(err)
			}
			for i := range prev {
				if i >= len(r.Results) || r.Results[i].Path != prev[i].Path || r.Results[i].Score != prev[i].Score {
					t.Fatalf("%q: maxResults %d changed rank %d: %v vs %v", q, n, i, resultPaths(prev), resultPaths(r.Results))
				}
			}
			prev = r.Results
		}
	}
}

// Class 8: the same paragraph in a daily log and in a summary note fills
// one result, which names both paths.
func TestClassDuplicatesCollapsedKeepEveryPath(t *testing.T) {
	para := "Decision: the gateway keeps idempotency keys for five minutes, then forgets them.\n"
	f := newFixture(t, map[string]string{
		"memory/2024-05-02.md":         "# Standup\n\n" + para,
		"memory/global/decisions.md":   "# Decisions\n\n" + para,
		"memory/roles/main/2024-05.md": "# Summary\n\n" + para,
		"memory/global/other.md":       "The gateway retries idempotent calls after a reconnect.\n",
	}, nil)
	f.sync(t)
	rs := f.search(t, "how long does the gateway keep idempotency keys")
	if len(rs) == 0 {
		t.Fatal("no results")
	}
	first := rs[0]
	all := append([]string{first.Path}, first.AlsoIn...)
	slices.Sort(all)
	want := []string{"memory/2024-05-02.md", "memory/global/decisions.md", "memory/roles/main/2024-05.md"}
	if !slices.Equal(all, want) {
		t.Fatalf("first result %s alsoIn %v; want the paths %v", first.Path, first.AlsoIn, want)
	}
	for _, r := range rs[1:] {
		if slices.Contains(want, r.Path) && strings.Contains(r.Snippet, "five minutes") {
			t.Errorf("a duplicate of the first result came back again: %+v", r)
		}
	}
}

// Class 8, many copies: when near-duplicates outnumber the spare of the
// pool the index is asked for (Ranking.poolFor), the search asks again with
// a larger pool, so the results are still n distinct chunks, and the folded
// copies' paths are kept.
func TestClassManyNearDuplicatesStillFillResults(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 14; i++ { // near copies: one word differs (Jaccard ≥ 0.8)
		files[fmt.Sprintf("memory/2024-05-%02d.md", i+1)] = fmt.Sprintf("# Log\n\nThe ferry timetable for the island changes in summer, boats leave every hour from pier %d.\n", i)
	}
	for i, w := range []string{"bicycles", "dogs", "luggage", "tickets", "cafés", "weather", "parking"} {
		files[fmt.Sprintf("memory/notes/ferry-%d.md", i)] = fmt.Sprintf("About the ferry and %s: a different note, number %d.\n", w, i)
	}
	f := newFixture(t, files, nil)
	f.sync(t)
	ctx := context.Background()
	r, err := f.m.Search(ctx, SearchOptions{Query: "ferry timetable island summer", MaxResults: 6, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != 6 {
		t.Fatalf("%d results, want 6: %+v", len(r.Results), r.Results)
	}
	first := r.Results[0]
	if !strings.Contains(first.Snippet, "timetable") || len(first.AlsoIn) != 13 {
		t.Fatalf("first result %s folds %d copies (%v), want the 13 other logs", first.Path, len(first.AlsoIn), first.AlsoIn)
	}
	for _, x := range r.Results[1:] {
		if strings.Contains(x.Snippet, "timetable") {
			t.Fatalf("a near copy came back again: %+v", x)
		}
	}
}

// Bad input: clear errors or empty results, never a crash.
func TestSearchBadInput(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	ctx := context.Background()
	cases := []struct {
		name, query string
		wantErr     error
	}{
		{"empty", "", ErrInvalidInput},
		{"blank", " \t\n", ErrInvalidInput},
		{"invalid utf-8", "caf\xe9", ErrInvalidInput},
		{"punctuation", "?!…。，", nil},
		{"emoji only", "🧪🙂", nil},
		{"MaxQueryChars characters", strings.Repeat("gate ", MaxQueryChars/5-1) + "gates" + "     ", nil},
		{"MaxQueryChars Chinese characters", "  " + strings.Repeat("记忆检索", MaxQueryChars/4) + "\n", nil},
		{"one character too many", strings.Repeat("gate ", MaxQueryChars/5-1) + "gates!", ErrInvalidInput},
		{"one Chinese character too many", strings.Repeat("记忆检索", MaxQueryChars/4) + "记", ErrInvalidInput},
		{"10k characters", strings.Repeat("memory search gateway 记忆 ", 400), ErrInvalidInput},
		{"13.8 MB", strings.Repeat("x", 13_800_000), ErrInvalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := f.m.Search(ctx, SearchOptions{Query: c.query})
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				if cerr := CheckQuery(c.query); cerr == nil || !strings.Contains(err.Error(), cerr.Error()) {
					t.Fatalf("Search's error %q does not carry CheckQuery's %v", err, cerr)
				}
				return
			}
			if cerr := CheckQuery(c.query); cerr != nil {
				t.Fatalf("CheckQuery = %v", cerr)
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if r.Results == nil {
				t.Fatal("nil results (the JSON must be [])")
			}
		})
	}
	if _, err := f.m.Search(ctx, SearchOptions{Query: "x", Mode: "fuzzy"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("unknown mode: %v", err)
	}
}

// A deleted index database is rebuilt from the Markdown at the next Open,
// with nothing lost.
func TestDeletedIndexRebuilt(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	before := f.m.Status()
	f.m.Close()
	if err := os.Remove(filepath.Join(f.idx, "index.db")); err != nil {
		t.Fatal(err)
	}
	f.open(t, nil)
	f.sync(t)
	if st := f.m.Status(); st.Files != before.Files || st.Chunks != before.Chunks || st.State != StateReady {
		t.Fatalf("after rebuild %+v, before %+v", st, before)
	}
	if rs := f.search(t, "Mirela"); len(rs) == 0 {
		t.Fatal("rebuilt index finds nothing")
	}
}

// A read-only state directory is a clear error at Open, and the Markdown is
// untouched.
func TestReadOnlyIndexDir(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("permissions are not enforced for root")
	}
	ws := t.TempDir()
	writeFile(t, ws, "MEMORY.md", "# Memory\n\nkept\n")
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.MkdirAll(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Workspace: ws, IndexDir: filepath.Join(ro, "index"), Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "index") {
		t.Fatalf("Open in a read-only dir: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "# Memory\n\nkept\n" {
		t.Fatal("the Markdown changed")
	}
}

// A caller who may read only some copies of a text gets a readable copy,
// with its own lines and layer, and never hears of the others.
func TestReadableCopyReplacesUnreadable(t *testing.T) {
	para := "Orion billing moved to Postgres 16 with logical replication.\n"
	f := newFixture(t, map[string]string{
		"memory/2026-11-01.md":       para,
		"memory/global/orion.md":     "# Orion\n\n" + para,
		"memory/roles/coder/pg.md":   para,
		"memory/global/unrelated.md": "The ferry timetable changed in June.\n",
	}, nil)
	f.sync(t)
	readable := func(p string) bool { return strings.HasPrefix(p, "memory/global/") }
	r, err := f.m.Search(context.Background(), SearchOptions{Query: "Orion billing Postgres", Readable: readable})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) == 0 {
		t.Fatal("the readable copy was lost")
	}
	for _, x := range r.Results {
		if !readable(x.Path) {
			t.Fatalf("unreadable path in results: %+v", x)
		}
		for _, a := range x.AlsoIn {
			if !readable(a) {
				t.Fatalf("unreadable path in alsoIn: %+v", x)
			}
		}
	}
	first := r.Results[0]
	if first.Path != "memory/global/orion.md" || first.Layer != LayerGlobal || first.StartLine < 1 {
		t.Fatalf("first result %+v", first)
	}
}
