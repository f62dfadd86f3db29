package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// move renames a folder and fails the test on error.
func move(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// deletes collects the paths of "delete" change events seen so far.
func deletes(c chan ChangeEvent) []string {
	var out []string
	for ev := range drain(c) {
		if ev.Reason == "delete" {
			out = append(out, ev.Paths...)
		}
	}
	return out
}

// A workspace, or its memory/ folder, that disappears is an error state that
// keeps the index; it is not a workspace whose notes were all deleted.
func TestWorkspaceVanishesKeepsIndex(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	drain(f.changes)
	ctx := context.Background()

	away := filepath.Join(t.TempDir(), "moved")
	move(t, f.ws, away)
	err := f.m.Sync(ctx)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sync of a missing workspace = %v, want ErrUnavailable", err)
	}
	st := f.m.Status()
	want := "workspace " + f.ws + " is missing"
	if st.State != StateError || st.Files != 6 || !strings.Contains(st.LastError, want) {
		t.Errorf("status with the workspace gone: %+v, want error state, 6 files, %q", st, want)
	}
	if rs := f.search(t, "Mirela Lisbon"); len(rs) == 0 || rs[0].Path != "memory/roles/writer/MEMORY.md" {
		t.Errorf("index not kept: %v", resultPaths(rs))
	}
	embedded := f.emb.texts.Load() // searches embed their query
	// Check says the same, and Import does not create the workspace again.
	if err := f.m.Check(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Check = %v", err)
	}
	if _, err := f.m.Import(ctx, ImportRequest{Name: "x.md", Content: "x\n"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Import into a missing workspace = %v", err)
	}
	if _, err := os.Stat(f.ws); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace recreated: %v", err)
	}
	move(t, away, f.ws)
	f.sync(t)
	if st := f.m.Status(); st.State != StateReady || st.Files != 6 || st.LastError != "" {
		t.Errorf("status after the workspace is back: %+v", st)
	}

	// The memory/ folder alone vanishing: MEMORY.md is still seen, nothing
	// under memory/ is dropped.
	move(t, filepath.Join(f.ws, "memory"), away)
	if err := f.m.Sync(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sync without memory/ = %v, want ErrUnavailable", err)
	}
	if st := f.m.Status(); st.State != StateError || st.Files != 6 || !strings.Contains(st.LastError, "memory folder") {
		t.Errorf("status with memory/ gone: %+v", st)
	}
	// Import must not create an empty memory/ (the next sync would then
	// drop every note).
	if _, err := f.m.Import(ctx, ImportRequest{Name: "x.md", Content: "x\n"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Import with memory/ gone = %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("memory/ recreated: %v", err)
	}
	move(t, away, filepath.Join(f.ws, "memory"))
	f.sync(t)
	if st := f.m.Status(); st.State != StateReady || st.Files != 6 {
		t.Errorf("status after memory/ is back: %+v", st)
	}
	if d := deletes(f.changes); len(d) > 0 {
		t.Errorf("files reported deleted: %v", d)
	}
	if n := f.emb.texts.Load() - embedded; n != 0 {
		t.Errorf("%d texts re-embedded after the outage", n)
	}
	if strings.Contains(f.logs.String(), "deleted=1") || !strings.Contains(f.logs.String(), "memory workspace unavailable") {
		t.Errorf("logs:\n%s", f.logs.String())
	}

	// Really deleting the notes (the folders stay readable) still works.
	os.RemoveAll(filepath.Join(f.ws, "memory", "roles"))
	f.sync(t)
	if st := f.m.Status(); st.Files != 5 || st.State != StateReady {
		t.Errorf("after a real delete: %+v", st)
	}
}

// An unreadable subfolder keeps its notes in the index (and says so).
func TestUnreadableFolderKeepsNotes(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("permissions do not apply to root")
	}
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	dir := filepath.Join(f.ws, "memory", "roles", "writer")
	if err := os.Chmod(dir, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	f.sync(t)
	st := f.m.Status()
	if st.Files != 6 || st.State != StateError || !strings.Contains(st.LastError, "memory/roles/writer: folder unreadable") {
		t.Errorf("status: %+v", st)
	}
	if rs := f.search(t, "Mirela Lisbon"); len(rs) == 0 || rs[0].Path != "memory/roles/writer/MEMORY.md" {
		t.Errorf("note of an unreadable folder dropped: %v", resultPaths(rs))
	}
	// An unreadable file keeps its indexed copy too.
	os.Chmod(dir, 0o755)
	p := filepath.Join(f.ws, "memory", "2024-05-01.md")
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(p, 0o644) })
	future := time.Now().Add(3 * time.Second)
	os.Chtimes(p, future, future) // make the sync look at it
	f.sync(t)
	if rs := f.search(t, "QK-7731"); len(rs) == 0 || rs[0].Path != "memory/2024-05-01.md" {
		t.Errorf("unreadable file dropped: %v", resultPaths(rs))
	}
	if st := f.m.Status(); !strings.Contains(st.LastError, "memory/2024-05-01.md: unreadable") {
		t.Errorf("status: %+v", st)
	}
	// Readable again with the same size and mtime: read by the next sync.
	os.Chmod(p, 0o644)
	f.sync(t)
	if st := f.m.Status(); st.State != StateReady || st.LastError != "" {
		t.Errorf("after chmod back: %+v", st)
	}
}

// Run notices a workspace that was moved away and back: the watcher is
// re-established without waiting for the periodic rescan.
func TestRunRecoversMovedWorkspace(t *testing.T) {
	f := newFixture(t, baseFiles, func(o *Options) {
		o.Debounce = 100 * time.Millisecond
		o.RescanInterval = time.Hour // only the watcher and the probe act
	})
	runManager(t, f.m)
	drain(f.changes)
	away := filepath.Join(t.TempDir(), "moved")
	move(t, f.ws, away)
	poll(t, "the missing workspace to be reported", 15*time.Second, func() bool {
		st := f.m.Status()
		return st.State == StateError && strings.Contains(st.LastError, "is missing")
	})
	if st := f.m.Status(); st.Files != 6 {
		t.Errorf("index not kept: %+v", st)
	}
	// Edits in the moved-away copy are not the workspace's.
	writeFile(t, away, "memory/elsewhere.md", "Not in the workspace: wombat.\n")
	move(t, away, f.ws)
	poll(t, "recovery", 15*time.Second, func() bool {
		st := f.m.Status()
		return st.State == StateReady && st.Files == 7
	})
	writeFile(t, f.ws, "memory/2024-07-01.md", "The walrus exhibit reopened.\n")
	poll(t, "the watcher to work again", 15*time.Second, func() bool {
		return hasPath(f.search(t, "walrus exhibit"), "memory/2024-07-01.md")
	})
	if d := deletes(f.changes); len(d) > 0 {
		t.Errorf("files reported deleted: %v", d)
	}
}

// A file with a few invalid bytes is text: indexed with U+FFFD, as Get
// serves it. Binary files are still skipped, with the reason in Status.
func TestInvalidUTF8Indexed(t *testing.T) {
	mostlyBinary := make([]byte, 200)
	for i := range mostlyBinary {
		mostlyBinary[i] = byte(0x80 + i%0x7f) // invalid UTF-8, no NUL
	}
	f := newFixture(t, map[string]string{
		"MEMORY.md":            "root note\n",
		"memory/corrupt.md":    "hello \xff\xfe world corrupttokenalpha\n",
		"memory/nul.md":        "abc\x00def",
		"memory/mostly-bin.md": string(mostlyBinary),
	}, nil)
	f.sync(t)
	rs := f.search(t, "corrupttokenalpha")
	if len(rs) == 0 || rs[0].Path != "memory/corrupt.md" {
		t.Fatalf("corrupt note not found: %v", resultPaths(rs))
	}
	g, err := f.m.Get(context.Background(), GetOptions{Path: "memory/corrupt.md"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.Text, "\uFFFD") || !strings.Contains(rs[0].Snippet, strings.TrimSpace(g.Text)) {
		t.Errorf("snippet %q and get %q differ", rs[0].Snippet, g.Text)
	}
	st := f.m.Status()
	if st.Files != 2 || !strings.Contains(st.LastError, "2 file(s) skipped") ||
		!strings.Contains(st.LastError, "memory/nul.md: binary content (NUL byte") ||
		!strings.Contains(st.LastError, "memory/mostly-bin.md: binary content (") {
		t.Errorf("status: %+v", st)
	}
	if !strings.Contains(f.logs.String(), "indexed with replacement characters") {
		t.Errorf("replacement not logged")
	}
}

func TestTextContent(t *testing.T) {
	cases := []struct {
		in       string
		text     string
		replaced int
		binary   bool
	}{
		{"plain\ttext\r\n", "plain\ttext\r\n", 0, false},
		{"caf\xe9", "caf\uFFFD", 1, false},
		{"\x1b[1mbold\x1b[0m", "\x1b[1mbold\x1b[0m", 0, false},
		{"a\x00b", "", 0, true},
		{"\x01\x02\x03\x04ab", "", 0, true},
		{"\xff\xfe\xfd\xfcab", "", 0, true},
		{"", "", 0, false},
	}
	for _, c := range cases {
		text, replaced, binary := textContent([]byte(c.in))
		if text != c.text || replaced != c.replaced || (binary != "") != c.binary {
			t.Errorf("textContent(%q) = %q, %d, %q", c.in, text, replaced, binary)
		}
	}
}

// A symlink to another memory file of the workspace is not a second note.
func TestSymlinkInsideIndexedOnce(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "secret.md", "outside zebra secret\n")
	f := newFixture(t, baseFiles, func(o *Options) {
		o.Debounce = 100 * time.Millisecond
		o.RescanInterval = time.Hour
	})
	if err := os.Symlink("../MEMORY.md", filepath.Join(f.ws, "memory/inside-link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(f.ws, "memory/outside-link.md")); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	if st := f.m.Status(); st.Files != 6 {
		t.Errorf("files = %d, want 6", st.Files)
	}
	rs := f.search(t, "espresso Tuesdays")
	if len(rs) == 0 || rs[0].Path != "MEMORY.md" || hasPath(rs, "memory/inside-link.md") {
		t.Errorf("results: %v", resultPaths(rs))
	}
	if hasPath(f.search(t, "zebra secret"), "memory/outside-link.md") {
		t.Errorf("outside link indexed")
	}
	// The watcher path agrees.
	runManager(t, f.m)
	if err := os.Symlink("global/decisions.md", filepath.Join(f.ws, "memory/decisions-link.md")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.ws, "memory/2024-07-02.md", "A marker note about otters.\n")
	// Counts settle after the note is searchable; a link indexed as a second
	// note would make them settle at 8, never 7.
	poll(t, "the watcher to index the new note (and only it: 7 files)", 15*time.Second, func() bool {
		st := f.m.Status()
		return hasPath(f.search(t, "otters marker"), "memory/2024-07-02.md") && st.Dirty == 0 && st.Files == 7
	})
}

// Status tells the truth in a fresh process: never indexed, last sync
// interrupted, and LastSync survive a restart; Check finds dirty files
// without reading them.
func TestStatusAcrossRestarts(t *testing.T) {
	emb := &cancellingEmbedder{Embedder: embed.NewBuiltin(embed.BuiltinOptions{}), n: 4}
	files := map[string]string{}
	for k, v := range baseFiles {
		files[k] = v
	}
	files["memory/broken.md"] = "bin\x00ary"
	f := newFixture(t, files, func(o *Options) {
		o.Embedder = emb
		o.SyncWorkers = 1 // the embed calls and the writes in file order: the cancel lands after some writes
	})
	if st := f.m.Status(); st.State != StateStale || st.LastSync != 0 || st.LastError != "not indexed yet" {
		t.Errorf("never indexed: %+v", st)
	}
	// Interrupted sync, then a fresh process.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	emb.cancel = cancel
	if err := f.m.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Sync returned %v", err)
	}
	emb.cancel = nil
	if st := f.m.Status(); st.State != StateStale || !strings.Contains(st.LastError, "did not complete") {
		t.Errorf("after a cancelled sync: %+v", st)
	}
	f.m.Close()
	f.open(t, func(o *Options) { o.Embedder = emb })
	st := f.m.Status()
	if st.State != StateStale || st.LastSync != 0 || !strings.Contains(st.LastError, "did not complete") || st.Files == 0 || st.Files >= 6 {
		t.Errorf("fresh process after an interrupted sync: %+v", st)
	}
	if err := f.m.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 7 memory files on disk (one binary, never indexed), st.Files indexed.
	if got := f.m.Status(); got.Dirty != 7-st.Files {
		t.Errorf("Check: dirty = %d, want %d (%+v)", got.Dirty, 7-st.Files, got)
	}
	f.sync(t)
	done := f.m.Status()
	if done.State != StateReady || done.LastSync == 0 || done.Dirty != 0 || done.Files != 6 {
		t.Fatalf("after a full sync: %+v", done)
	}

	// A fresh process after a completed sync: ready, same LastSync, the
	// skipped file still reported and not counted dirty.
	f.m.Close()
	f.open(t, func(o *Options) { o.Embedder = emb })
	st = f.m.Status()
	if st.State != StateReady || st.LastSync != done.LastSync || st.Files != 6 || !strings.Contains(st.LastError, "memory/broken.md") {
		t.Errorf("fresh process after a sync: %+v (before: %+v)", st, done)
	}
	writeFile(t, f.ws, "memory/2024-08-01.md", "new\n")
	writeFile(t, f.ws, "memory/2024-05-01.md", "changed\n")
	os.Remove(filepath.Join(f.ws, "memory/2024-05-02.md"))
	if err := f.m.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := f.m.Status(); st.Dirty != 3 || st.State != StateStale || !strings.Contains(st.LastError, "3 file(s) changed") {
		t.Errorf("Check after 3 changes: %+v", st)
	}
	f.sync(t)
	if st := f.m.Status(); st.Dirty != 0 || st.State != StateReady || st.LastSync < done.LastSync {
		t.Errorf("after sync: %+v", st)
	}
}

// Files and Chunks grow while a long sync commits its groups.
func TestCountsDuringSync(t *testing.T) {
	var big strings.Builder
	for i := 0; i < 2200; i++ {
		big.WriteString("pelican " + strconv.Itoa(i) + "\n")
	}
	var seen []Status
	var f *fixture
	f = newFixture(t, map[string]string{
		"memory/a-big.md":   big.String(),
		"memory/b-small.md": "small note\n",
		"memory/c-small.md": "another note\n",
	}, func(o *Options) {
		// One line per chunk: the big file alone exceeds a bulk group's
		// operation limit, so its group is committed mid-sync.
		o.Chunking = chunk.Options{MaxTokens: 4, OverlapTokens: -1}
		o.OnProgress = func(p Progress) {
			if p.Done > 0 && p.Done < p.Total {
				seen = append(seen, f.m.Status())
			}
		}
	})
	f.sync(t)
	if len(seen) == 0 {
		t.Fatal("no progress seen")
	}
	if st := seen[0]; st.State != StateIndexing || st.Files != 1 || st.Chunks < 2000 {
		t.Errorf("status after the first committed group: %+v", st)
	}
	if st := f.m.Status(); st.Files != 3 {
		t.Errorf("final: %+v", st)
	}
}

func TestImportNames(t *testing.T) {
	f := newFixture(t, map[string]string{"MEMORY.md": "root\n"}, nil)
	ctx := context.Background()
	for name, want := range map[string]string{
		"a.MARKDOWN": "memory/a.md",
		"b.TXT":      "memory/b.md",
		"c.Md":       "memory/c.md",
	} {
		r, err := f.m.Import(ctx, ImportRequest{Name: name, Content: "note\n"})
		if err != nil || r.Path != want {
			t.Errorf("Import(%q) = %+v, %v; want %s", name, r, err, want)
		}
	}
	for _, name := range []string{"evil.exe", "notes", "photo.png", "x.md.exe", "archive.tar.gz"} {
		_, err := f.m.Import(ctx, ImportRequest{Name: name, Content: "MZ"})
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "only .md, .markdown and .txt notes can be imported") {
			t.Errorf("Import(%q) = %v", name, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(f.ws, "memory", "*.exe*")); len(m) > 0 {
		t.Errorf("stored: %v", m)
	}
}
