package memory

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

func TestQuestionParts(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"What is QK-7731? 连接池怎么配置？", []string{"What is QK-7731?", "连接池怎么配置？"}},
		{"What is X? And how do we Y?", []string{"What is X?", "And how do we Y?"}},
		{"We moved the server. Where is the backup key?", nil},
		{"部署完成了吗？回滚方案是什么。", []string{"部署完成了吗？", "回滚方案是什么。"}},
		{"部署完成了。回滚方案是什么？", nil},
		{"How many engineers did I lead at first?\nHow many now?", []string{"How many engineers did I lead at first?", "How many now?"}},
		{"What did Caroline research?", nil},
		{"v1.2 release notes", nil},
		{"e.g. the parser", nil},
		{"Would Caroline likely have Dr. Seuss books on her bookshelf?", nil},
		{"Would Tim enjoy reading books by C. S. Lewis or John Greene?", nil},
		{"What J.K. Rowling quote does Tim resonate with?", nil},
		{"Really?? 连接池", []string{"Really??", "连接池"}},
		{"??? QK-7731", nil}, // a part without a letter joins the next
		{"a? b? c? d? e? f?", []string{"a?", "b?", "c?", "d? e? f?"}}, // at most MaxQuestionParts
	} {
		got := questionParts(tc.q)
		if !slices.Equal(got, tc.want) {
			t.Errorf("questionParts(%q) = %q, want %q", tc.q, got, tc.want)
		}
	}
}

// A question joining two asks gets the best match of each, at the default
// maxResults and floor, on the corpora's real workspaces (mixed Chinese and
// English notes); searched as a whole only, one of the two answers is
// missing. The first result is the same for every maxResults.
func TestMultiPartQuestionCorpora(t *testing.T) {
	if testing.Short() {
		t.Skip("corpora test skipped in -short mode")
	}
	root := corporaDir(t)
	ctx := context.Background()
	for _, tc := range []struct {
		workspace, query string
		want             []string // the file answering each part
	}{
		{"robertsong2019-openclaw-workspace", "What is the project dashboard generator health score? agent-context-store 代码为什么未持久化？",
			[]string{"memory/2026-03-22-dashboard-tool.md", "MEMORY.md"}},
		{"sandmark78-openclaw-workspace", "B2B 冷邮件为什么没有收益？IDENTITY.md 编辑失败是怎么修复的？",
			[]string{"memory/2026-02-25-revenue-report.md", "memory/2026-03-10-identity-fix.md"}},
		{"ariffazil-openclaw-workspace", "What is AUDIT-20260426-KIMI-002? How was the Masjid Besi Putrajaya day trip?",
			[]string{"memory/2026-04-26.md", "memory/2026-04-04-putrajaya-daytrip.md"}},
	} {
		t.Run(tc.workspace, func(t *testing.T) {
			m, err := Open(Options{Workspace: filepath.Join(root, "workspaces", tc.workspace), IndexDir: filepath.Join(t.TempDir(), "index"), Logger: quietLogger(), DisableWatcher: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := m.Search(ctx, SearchOptions{Query: tc.query})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range res.Results {
				got = append(got, r.Path)
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("%q: %s missing from %v", tc.query, w, resultPaths(res.Results))
				}
			}
			for i := 1; i < len(res.Results); i++ {
				if res.Results[i].Score > res.Results[i-1].Score {
					t.Errorf("results not in score order: %v", res.Results)
				}
			}
			// Each part's best chunk is in the answer.
			for _, part := range questionParts(tc.query) {
				pr, err := m.Search(ctx, SearchOptions{Query: part, single: true})
				if err != nil {
					t.Fatal(err)
				}
				if len(pr.Results) == 0 {
					t.Errorf("part %q alone: no result", part)
					continue
				}
				best, found := pr.Results[0], false
				for _, r := range res.Results {
					found = found || (r.Path == best.Path && r.StartLine == best.StartLine)
				}
				if !found {
					t.Errorf("part %q: its best %s:%d missing from %v", part, best.Path, best.StartLine, resultPaths(res.Results))
				}
			}
			whole, err := m.Search(ctx, SearchOptions{Query: tc.query, single: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("split: %v; whole only: %v", resultPaths(res.Results), resultPaths(whole.Results))
			first := ""
			for _, n := range []int{1, 2, 5, 6, 20} {
				r, err := m.Search(ctx, SearchOptions{Query: tc.query, MaxResults: n})
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Results) == 0 {
					t.Fatalf("maxResults %d: no result", n)
				}
				if len(r.Results) > n {
					t.Errorf("maxResults %d: %d results", n, len(r.Results))
				}
				if first == "" {
					first = r.Results[0].Path
				} else if r.Results[0].Path != first {
					t.Errorf("maxResults %d: first %s, want %s as for maxResults 1", n, r.Results[0].Path, first)
				}
			}
		})
	}
}
