package memory

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestInspect counts an OpenClaw-layout folder as the first-start screen
// shows it: notes, daily logs, MEMORY.md, context files; never a hidden
// folder, a conflict copy or a file outside memory/.
func TestInspect(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"MEMORY.md":                             "# 长期记忆\n",
		"SOUL.md":                               "be kind\n",
		"USER.md":                               "user\n",
		"README.md":                             "not memory\n",
		"memory/2026-11-01.md":                  "- 周会\n",
		"memory/2026-11-28-standup.md":          "- standup\n",
		"memory/projects/atrium.md":             "notes\n",
		"memory/x.conflict-20261128T101010Z.md": "copy\n",
		"memory/.trash/old.md":                  "hidden\n",
		"docs/guide.md":                         "outside\n",
	}
	for rel, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Notes != 4 || s.Daily != 2 || !s.MemoryFile || !slices.Equal(s.Context, []string{"SOUL.md", "USER.md"}) || s.Partial {
		t.Fatalf("summary %+v", s)
	}
	want := []string{"MEMORY.md", "memory/projects/atrium.md", "memory/2026-11-28-standup.md", "memory/2026-11-01.md"}
	if !slices.Equal(s.Sample, want) {
		t.Fatalf("sample %v, want %v", s.Sample, want)
	}
	if s.Bytes == 0 {
		t.Fatal("no bytes counted")
	}
	if _, err := Inspect(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing folder: %v", err)
	}
	if _, err := Inspect(filepath.Join(dir, "MEMORY.md")); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("a file: %v", err)
	}
}
