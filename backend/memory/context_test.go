package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContextFilesReadableNotSearched (issue 15, item 6): on a real
// OpenClaw workspace, SOUL.md and the other context files are readable
// with memory_get, listed by Files as role main's context, never returned
// by a search (not even for their own words), and MainContext gives them
// in OpenClaw's order.
func TestContextFilesReadableNotSearched(t *testing.T) {
	root := corporaDir(t)
	ws := filepath.Join(root, "workspaces", "sandmark78-openclaw-workspace")
	m, err := Open(Options{Workspace: ws, IndexDir: filepath.Join(t.TempDir(), "index"), Logger: quietLogger(), DisableWatcher: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	soul, err := os.ReadFile(filepath.Join(ws, "SOUL.md"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Get(ctx, GetOptions{Path: "SOUL.md"})
	if err != nil || g.Text != string(soul) {
		t.Fatalf("Get SOUL.md: %v (%d bytes, want %d)", err, len(g.Text), len(soul))
	}
	files, err := m.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, f := range files {
		if f.Context {
			listed = append(listed, f.Path)
			if f.Chunks != 0 || f.Role != MainRole || f.Layer != LayerRole || f.Size == 0 {
				t.Errorf("context file %+v", f)
			}
		}
	}
	if got := strings.Join(listed, ","); got != "AGENTS.md,SOUL.md,TOOLS.md,IDENTITY.md,USER.md,HEARTBEAT.md" {
		t.Errorf("context files listed: %s", got)
	}
	// Their own words find other notes, never them.
	for _, name := range listed {
		b, _ := os.ReadFile(filepath.Join(ws, name))
		q := firstLine(string(b))
		res, err := m.Search(ctx, SearchOptions{Query: q, MaxResults: 10, MinScore: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Results {
			if !strings.Contains(r.Path, "/") && r.Path != "MEMORY.md" {
				t.Errorf("%q found %s: context files are not searched", q, r.Path)
			}
		}
	}
	text, err := m.MainContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, name := range listed {
		i := strings.Index(text, "## "+name+"\n")
		if i <= last {
			t.Errorf("MainContext: %s missing or out of order", name)
		}
		last = i
	}
	// Other files at the root stay out of memory.
	if _, err := m.Get(ctx, GetOptions{Path: "SOURCE.md"}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Get SOURCE.md: %v, want ErrInvalidPath", err)
	}
}

// TestContextFileLimits: a long context file is cut in MainContext with a
// note, and a context file that is a symlink out of the workspace is
// neither listed nor read.
func TestContextFileLimits(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.md")
	if err := os.WriteFile(outside, []byte("outside secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, map[string]string{
		"MEMORY.md": "# Memory\n",
		"SOUL.md":   strings.Repeat("灵魂", MaxContextFileChars),
	}, nil)
	if err := os.Symlink(outside, filepath.Join(f.ws, "USER.md")); err != nil {
		t.Fatal(err)
	}
	text, err := f.m.MainContext(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "SOUL.md is longer; cut at") || len([]rune(text)) > MaxContextFileChars+1000 {
		t.Errorf("long SOUL.md not cut: %d runes", len([]rune(text)))
	}
	if strings.Contains(text, "outside secret") || strings.Contains(text, "## USER.md") {
		t.Error("a symlink out of the workspace was read")
	}
	if _, err := f.m.Get(context.Background(), GetOptions{Path: "USER.md"}); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Get USER.md (symlink out): %v, want ErrInvalidPath", err)
	}
	files, _ := f.m.Files(context.Background())
	for _, fi := range files {
		if fi.Path == "USER.md" {
			t.Error("a symlink out of the workspace is listed")
		}
	}
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(strings.TrimLeft(l, "#>-* ")); len([]rune(l)) > 8 {
			return l
		}
	}
	return s
}
