package memory

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// copyTree copies the regular files and folders of src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The tester's session on a copy of a real workspace: served, moved away and
// back, then given an inside symlink and a note with invalid UTF-8.
func TestCorpusOutageAndOddFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("corpora test skipped in -short mode")
	}
	src := filepath.Join(corporaDir(t), "workspaces", "scchin-openclaw-workspace")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("corpus workspace missing: %v", err)
	}
	f := &fixture{ws: filepath.Join(t.TempDir(), "ws"), idx: filepath.Join(t.TempDir(), "index"), emb: newCounting(0), logs: &syncBuffer{}, changes: make(chan ChangeEvent, 1000)}
	copyTree(t, src, f.ws)
	f.open(t, func(o *Options) {
		o.Debounce = 100 * time.Millisecond
		o.RescanInterval = time.Hour
	})
	runManager(t, f.m)
	before := f.m.Status()
	if before.State != StateReady || before.Files == 0 {
		t.Fatalf("initial status: %+v", before)
	}

	away := filepath.Join(t.TempDir(), "away")
	move(t, f.ws, away)
	poll(t, "the outage to be reported", 15*time.Second, func() bool {
		return strings.Contains(f.m.Status().LastError, "workspace "+f.ws+" is missing")
	})
	if st := f.m.Status(); st.State != StateError || st.Files != before.Files || st.Chunks != before.Chunks {
		t.Errorf("during the outage: %+v, before: %+v", st, before)
	}
	move(t, away, f.ws)
	poll(t, "recovery", 15*time.Second, func() bool {
		st := f.m.Status()
		return st.State == StateReady && st.Files == before.Files && st.LastError == ""
	})
	if d := deletes(f.changes); len(d) > 0 {
		t.Errorf("%d files reported deleted by the outage", len(d))
	}

	if err := os.Symlink("../MEMORY.md", filepath.Join(f.ws, "memory", "inside-link.md")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.ws, "memory/corrupt.md", "hello \xff\xfe world corrupttokenalpha\n")
	poll(t, "the corrupt note to be indexed", 15*time.Second, func() bool {
		return hasPath(f.search(t, "corrupttokenalpha"), "memory/corrupt.md") && f.m.Status().Dirty == 0
	})
	if st := f.m.Status(); st.Files != before.Files+1 {
		t.Errorf("files = %d, want %d (the link is not a note)", st.Files, before.Files+1)
	}
	files, err := f.m.Files(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range files {
		if fi.Path == "memory/inside-link.md" {
			t.Errorf("inside link indexed")
		}
	}
}
