package memory

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptsFindEachOther (issue 15, item 4): on real notes, a question in
// Simplified Chinese finds what the same question in Traditional finds, and
// the reverse, in each leg alone and in the hybrid with the default floor:
// the same file, a chunk holding the evidence, in the top 5, and the same
// first result.
func TestScriptsFindEachOther(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes two corpus workspaces")
	}
	root := corporaDir(t)
	cases := []struct {
		workspace    string
		trad, simp   string
		path, phrase string // expected file and text inside the hit (as written in the note)
	}{
		// Traditional notes (zh-Hant), asked in both scripts.
		{"scchin-openclaw-workspace", "產業類別", "产业类别", "MEMORY.md", "產業類別"},
		{"scchin-openclaw-workspace", "刪除決定權", "删除决定权", "MEMORY.md", "刪除決定權"},
		{"scchin-openclaw-workspace", "記憶宮殿", "记忆宫殿", "MEMORY.md", "記憶宮殿"},
		// Simplified notes (zh-Hans), asked in both scripts.
		{"sandmark78-openclaw-workspace", "B2B 冷郵件為什麼沒有收益", "B2B 冷邮件为什么没有收益", "memory/2026-02-25-revenue-report.md", "冷邮件"},
	}
	managers := map[string]*Manager{}
	ctx := context.Background()
	for _, c := range cases {
		if managers[c.workspace] != nil {
			continue
		}
		m, err := Open(Options{Workspace: filepath.Join(root, "workspaces", c.workspace), IndexDir: filepath.Join(t.TempDir(), "index"), Logger: quietLogger(), DisableWatcher: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		managers[c.workspace] = m
	}
	for _, c := range cases {
		m := managers[c.workspace]
		for _, mode := range []string{ModeKeyword, ModeVector, ModeHybrid} {
			var first [2]string
			for i, q := range []string{c.trad, c.simp} {
				o := SearchOptions{Query: q, MaxResults: 5, Mode: mode}
				if mode != ModeHybrid {
					o.MinScore = -1 // a leg alone: the ranking, without the floor
				}
				res, err := m.Search(ctx, o)
				if err != nil {
					t.Fatalf("%s %q: %v", mode, q, err)
				}
				found := false
				for _, r := range res.Results {
					if r.Path != c.path {
						continue
					}
					g, err := m.Get(ctx, GetOptions{Path: r.Path, From: r.StartLine, Lines: r.EndLine - r.StartLine + 1})
					found = found || err == nil && strings.Contains(g.Text, c.phrase)
				}
				if !found {
					t.Errorf("%s %s %q: want %s holding %q in the top 5, got %v", c.workspace, mode, q, c.path, c.phrase, resultPaths(res.Results))
				}
				if len(res.Results) > 0 {
					first[i] = res.Results[0].Path
					t.Logf("%s %q → %s %.3f", mode, q, res.Results[0].Path, res.Results[0].Score)
				}
			}
			if first[0] != first[1] {
				t.Errorf("%s: first result %s for %q but %s for %q", mode, first[0], c.trad, first[1], c.simp)
			}
		}
	}
}
