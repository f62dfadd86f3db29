package chat

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/hanzi"
)

// TestOfflineAnswersInTheQuestionsScript (issue 14 item 13): over a real
// Traditional workspace searched by the real memory engine, a question in
// Traditional gets the answer's own words in Traditional, one in
// Simplified gets them in Simplified, and either way the quoted notes and
// the echoed question stay exactly as written.
func TestOfflineAnswersInTheQuestionsScript(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes a corpus workspace")
	}
	root := os.Getenv("ATRIUM_CORPORA")
	if root == "" {
		root = filepath.Join("..", "..", "..", "shared", "corpora")
	}
	ws := filepath.Join(root, "workspaces", "scchin-openclaw-workspace")
	if _, err := os.Stat(ws); err != nil {
		t.Skipf("corpus workspace absent (%v); set ATRIUM_CORPORA", err)
	}
	m, err := memory.Open(memory.Options{Workspace: ws, IndexDir: filepath.Join(t.TempDir(), "index"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DisableWatcher: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	off := NewOffline(OfflineOptions{Memory: m})
	for _, c := range []struct {
		q     string
		want  hanzi.Script
		words string // a phrase of the answer's own wording in that script
	}{
		{"產業類別優先原則是什麼？", hanzi.Traditional, "我在記憶中找到"},
		{"产业类别优先原则是什么？", hanzi.Simplified, "我在记忆中找到"},
	} {
		resp, sources, err := off.Answer(context.Background(), c.q, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(sources) == 0 {
			t.Fatalf("%q: nothing found; answer:\n%s", c.q, resp.Content)
		}
		own, quotes := splitQuotes(resp.Content)
		if !strings.Contains(own, c.words) {
			t.Errorf("%q: answer lacks %q:\n%s", c.q, c.words, own)
		}
		if got := hanzi.Detect(own); got != c.want {
			t.Errorf("%q: the answer's own words read as %v, want %v:\n%s", c.q, got, c.want, own)
		}
		if !strings.Contains(own, "“"+c.q+"”") {
			t.Errorf("%q: the question is not echoed as written:\n%s", c.q, own)
		}
		// The quotes are the notes as written (Traditional, whatever the
		// question's script): each quoted line is in a quoted file.
		if len(quotes) == 0 {
			t.Fatalf("%q: no quoted lines", c.q)
		}
		for _, l := range quotes {
			if l = strings.TrimSuffix(l, "…"); l != "" && !inAnyFile(t, ws, sources, l) {
				t.Errorf("%q: quoted line %q is not in the notes as written", c.q, l)
			}
		}
	}

	// A Simplified note quoted in a Traditional answer stays Simplified.
	simp := filepath.Join(root, "workspaces", "sandmark78-openclaw-workspace")
	line := firstLineWith(t, filepath.Join(simp, "memory", "2026-02-25-revenue-report.md"), "冷邮件")
	off = NewOffline(OfflineOptions{Memory: &fakeSearcher{results: []memory.SearchResult{
		{Path: "memory/2026-02-25-revenue-report.md", StartLine: 1, EndLine: 1, Score: 0.5, Snippet: line}}}})
	resp, _, err := off.Answer(context.Background(), "冷郵件為什麼沒有收益？", nil)
	if err != nil {
		t.Fatal(err)
	}
	own, quotes := splitQuotes(resp.Content)
	if hanzi.Detect(own) != hanzi.Traditional || len(quotes) != 1 || quotes[0] != strings.TrimSpace(line) {
		t.Errorf("want Traditional wording around the Simplified quote %q, got:\n%s", line, resp.Content)
	}
}

// firstLineWith returns the first line of file that contains s.
func firstLineWith(t *testing.T, file, s string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Skipf("corpus file absent: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	t.Fatalf("%s: no line holds %q", file, s)
	return ""
}

// splitQuotes separates an offline answer's own lines from its quoted ones
// ("> " block quotes), without the quote markers.
func splitQuotes(answer string) (own string, quotes []string) {
	var b strings.Builder
	for _, l := range strings.Split(answer, "\n") {
		if q, ok := strings.CutPrefix(l, ">"); ok {
			quotes = append(quotes, strings.TrimSpace(q))
			continue
		}
		b.WriteString(l + "\n")
	}
	return b.String(), quotes
}

func inAnyFile(t *testing.T, ws string, sources []history.Source, line string) bool {
	t.Helper()
	for _, s := range sources {
		b, err := os.ReadFile(filepath.Join(ws, s.Path))
		if err == nil && strings.Contains(string(b), line) {
			return true
		}
	}
	return false
}
