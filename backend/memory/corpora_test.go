package memory

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// corporaDir is shared/corpora beside the repository (…/shared/corpora when
// the repo is …/main); tests and benchmarks that need it skip without it.
func corporaDir(tb testing.TB) string {
	tb.Helper()
	d := os.Getenv("ATRIUM_CORPORA") // override for checkouts elsewhere
	if d == "" {
		d = filepath.Join("..", "..", "..", "shared", "corpora")
	}
	d, err := filepath.Abs(d)
	if err != nil {
		tb.Fatal(err)
	}
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		tb.Skipf("corpora not found at %s (expected shared/corpora beside the repository, or set ATRIUM_CORPORA); skipping", d)
	}
	return d
}

// corpusWorkspaces lists the OpenClaw workspaces and the LoCoMo Markdown workspaces.
func corpusWorkspaces(tb testing.TB, root string) (openclaw, locomo []string) {
	tb.Helper()
	openclaw, _ = filepath.Glob(filepath.Join(root, "workspaces", "*-workspace"))
	locomo, _ = filepath.Glob(filepath.Join(root, "bench", "locomo", "workspaces", "conv-*"))
	sort.Strings(openclaw)
	sort.Strings(locomo)
	if len(openclaw) == 0 || len(locomo) == 0 {
		tb.Skipf("corpora incomplete under %s; skipping", root)
	}
	return openclaw, locomo
}

// findTag returns the workspace-relative file and 1-based line holding a
// LoCoMo turn tag such as "[D4:3]".
func findTag(t *testing.T, ws, tag string) (string, int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(ws, "memory", "*.md"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if strings.Contains(sc.Text(), "- "+tag+" ") {
				fh.Close()
				return "memory/" + filepath.Base(f), n
			}
		}
		fh.Close()
	}
	t.Fatalf("tag %s not found in %s", tag, ws)
	return "", 0
}

type knownAnswer struct {
	workspace string // folder name
	query     string
	path      string // expected file (workspace-relative)
	tag       string // LoCoMo evidence tag: expected file and line are looked up
	contains  string // text that must be inside the expected line range
}

// Hand-checked queries against the corpora: Chinese (simplified and
// traditional), English, Malay-English, and LoCoMo questions whose evidence
// turn is known from qrels.tsv.
var knownAnswers = []knownAnswer{
	{workspace: "sandmark78-openclaw-workspace", query: "B2B 冷邮件为什么没有收益", path: "memory/2026-02-25-revenue-report.md", contains: "冷邮件"},
	{workspace: "sandmark78-openclaw-workspace", query: "IDENTITY.md 编辑失败是怎么修复的", path: "memory/2026-03-10-identity-fix.md", contains: "sed"},
	{workspace: "scchin-openclaw-workspace", query: "google-places 地點查詢 skill 重寫", path: "memory/2026-03-20.md", contains: "google-places"},
	{workspace: "robertsong2019-openclaw-workspace", query: "agent-context-store 代码未持久化", path: "MEMORY.md", contains: "未持久化"},
	{workspace: "robertsong2019-openclaw-workspace", query: "project dashboard generator health score", path: "memory/2026-03-22-dashboard-tool.md", contains: "Health Score"},
	{workspace: "ariffazil-openclaw-workspace", query: "Masjid Besi Putrajaya", path: "memory/2026-04-04-putrajaya-daytrip.md", contains: "Masjid Besi"},
	{workspace: "seanfzc-openclaw-workspace", query: "ATOM-SG MVP final verification", path: "memory/2026-04-16.md", contains: "ATOM-SG"},
	{workspace: "conv-26", query: "What country is Caroline's grandma from?", tag: "[D4:3]"},
	{workspace: "conv-26", query: "What was Melanie's favorite book from her childhood?", tag: "[D6:10]"},
	{workspace: "conv-26", query: "What did Melanie and her family see during their camping trip last year?", tag: "[D10:14]"},
	{workspace: "conv-26", query: "Who performed at the concert at Melanie's daughter's birthday?", tag: "[D11:3]"},
	{workspace: "conv-26", query: "What kind of pot did Mel and her kids make with clay?", tag: "[D8:4]"},
	{workspace: "conv-26", query: "What book did Caroline recommend to Melanie?", tag: "[D7:11]"},
}

// TestCorpora indexes every corpus workspace through the real pipeline
// (chunker, builtin embedder, SQLite + sqlite-vec + Bleve) and checks known
// answers: each expected file must be in the top 5, with a result whose line
// range covers the evidence.
func TestCorpora(t *testing.T) {
	if testing.Short() {
		t.Skip("corpora test skipped in -short mode")
	}
	root := corporaDir(t)
	openclaw, locomo := corpusWorkspaces(t, root)
	managers := map[string]*Manager{}
	ctx := context.Background()
	for _, ws := range append(append([]string{}, openclaw...), locomo...) {
		m, err := Open(Options{Workspace: ws, IndexDir: filepath.Join(t.TempDir(), "index"), Logger: quietLogger(), DisableWatcher: true})
		if err != nil {
			t.Fatalf("Open %s: %v", ws, err)
		}
		defer m.Close()
		if err := m.Sync(ctx); err != nil {
			t.Fatalf("Sync %s: %v", ws, err)
		}
		st := m.Status()
		if st.State != StateReady || st.Files == 0 || st.Chunks < st.Files {
			t.Errorf("%s: status %+v", filepath.Base(ws), st)
		}
		t.Logf("%s: %d files, %d chunks, layout %s, lastError %q", filepath.Base(ws), st.Files, st.Chunks, st.Layout, st.LastError)
		managers[filepath.Base(ws)] = m
	}
	for _, ka := range knownAnswers {
		m := managers[ka.workspace]
		if m == nil {
			t.Errorf("workspace %s missing", ka.workspace)
			continue
		}
		wantPath, wantLine := ka.path, 0
		if ka.tag != "" {
			wantPath, wantLine = findTag(t, m.ws, ka.tag)
		}
		res, err := m.Search(ctx, SearchOptions{Query: ka.query, MaxResults: 5})
		if err != nil {
			t.Fatalf("search %q: %v", ka.query, err)
		}
		ok := false
		for _, r := range res.Results {
			if r.Path != wantPath {
				continue
			}
			switch {
			case wantLine > 0:
				ok = ok || (r.StartLine <= wantLine && wantLine <= r.EndLine)
			case ka.contains != "":
				g, err := m.Get(ctx, GetOptions{Path: r.Path, From: r.StartLine, Lines: r.EndLine - r.StartLine + 1})
				ok = ok || (err == nil && strings.Contains(g.Text, ka.contains))
			default:
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s %q: want %s (line %d) in top 5, got %v", ka.workspace, ka.query, wantPath, wantLine, resultPaths(res.Results))
		} else {
			t.Logf("ok %s %q → %v", ka.workspace, ka.query, resultPaths(res.Results)[:min(2, len(res.Results))])
		}
	}
}
