package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// A new file or folder whose name equals an existing one after NFKC and
// case folding is refused, naming the existing one, by every way memory
// creates files: memory_write, memory_note (a new role folder), a new
// role; an import takes the next free name instead, as for an exact
// duplicate (issue 14 item 7).
func TestLookalikeNames(t *testing.T) {
	ctx := context.Background()
	files := teamFiles()
	files["memory/global/notes.md"] = "# Notes\n"
	files["memory/global/笔记(一).md"] = "# 笔记\n"
	files["memory/global/会议2026.md"] = "# 会议\n"
	files["memory/roles/Editor/notes.md"] = "# Editor\n"
	f, _ := newSessionFixture(t, files, nil)
	exists := func(rel string) bool {
		_, err := os.Lstat(filepath.Join(f.ws, filepath.FromSlash(rel)))
		return err == nil
	}
	refused := func(what string, err error, name, existing string) {
		t.Helper()
		if !errors.Is(err, ErrExists) || !errors.Is(err, safefile.ErrLookalike) ||
			!strings.Contains(err.Error(), name+" looks like the existing "+existing) {
			t.Errorf("%s: %v, want ErrExists: %s looks like the existing %s", what, err, name, existing)
		}
		if exists(name) {
			t.Errorf("%s: %s was created", what, name)
		}
	}
	for _, tc := range []struct{ path, name, existing string }{
		{"memory/global/ＮＯＴＥＳ.md", "memory/global/ＮＯＴＥＳ.md", "memory/global/notes.md"},
		{"memory/global/Notes.md", "memory/global/Notes.md", "memory/global/notes.md"},
		{"memory/global/笔记（一）.md", "memory/global/笔记（一）.md", "memory/global/笔记(一).md"},
		{"memory/global/会议２０２６.md", "memory/global/会议２０２６.md", "memory/global/会议2026.md"},
		{"memory/ＧＬＯＢＡＬ/x.md", "memory/ＧＬＯＢＡＬ", "memory/global"},
		{"memory/roles/Writer/x.md", "memory/roles/Writer", "memory/roles/writer"},
	} {
		_, err := f.m.Write(ctx, WriteRequest{Path: tc.path, Content: "x", Mode: WriteReplace, Writer: AdminWriter})
		refused("write "+tc.path, err, tc.name, tc.existing)
	}
	// Writing the existing files themselves is fine, and a different name too.
	f.write(t, WriteRequest{Path: "memory/global/notes.md", Content: "more", Mode: WriteAppend, Writer: AdminWriter})
	f.write(t, WriteRequest{Path: "memory/global/笔记(二).md", Content: "二", Mode: WriteReplace, Writer: AdminWriter})
	f.write(t, WriteRequest{Path: "memory/global/筆記(一).md", Content: "繁體", Mode: WriteReplace, Writer: AdminWriter})

	// memory_note of role "editor" would create memory/roles/editor beside
	// the hand-made memory/roles/Editor.
	_, err := f.m.Note(ctx, NoteRequest{Role: "editor", Text: "a fact"})
	refused("note as editor", err, "memory/roles/editor", "memory/roles/Editor")
	// A new role named like an existing role folder: refused before the .acl changes.
	acl := f.read(t, "memory/.acl")
	_, err = f.m.CreateRole(ctx, CreateRoleRequest{Role: "WRITER", Description: "Writes"})
	refused("create role WRITER", err, "memory/roles/WRITER", "memory/roles/writer")
	if f.read(t, "memory/.acl") != acl {
		t.Error("the refused role changed the .acl")
	}

	// Import: the look-alike name counts as taken.
	for _, tc := range []struct{ name, want string }{
		{"ＮＯＴＥＳ.md", "memory/global/ＮＯＴＥＳ-1.md"},
		{"笔记（一）.txt", "memory/global/笔记（一）-1.md"},
		{"Notes.markdown", "memory/global/Notes-2.md"},
	} {
		res, err := f.m.Import(ctx, ImportRequest{Name: tc.name, Content: "# imported\n", Layer: LayerGlobal})
		if err != nil || res.Path != tc.want {
			t.Errorf("import %s = %+v, %v; want %s", tc.name, res, err, tc.want)
		}
	}
}

// Two writers creating look-alike names at once: exactly one file is
// created, the other write is refused (the write lock is the folded path's).
func TestLookalikeNamesConcurrent(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, teamFiles(), nil)
	for i := range 20 {
		names := []string{"memory/global/plan" + string(rune('a'+i)) + ".md", "memory/global/ＰＬＡＮ" + string(rune('Ａ'+i)) + ".md"}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k := range names {
			wg.Go(func() {
				_, errs[k] = f.m.Write(ctx, WriteRequest{Path: names[k], Content: "x", Mode: WriteReplace, Writer: AdminWriter})
			})
		}
		wg.Wait()
		created := 0
		for k, n := range names {
			if _, err := os.Lstat(filepath.Join(f.ws, filepath.FromSlash(n))); err == nil {
				created++
				if errs[k] != nil {
					t.Errorf("%s exists but its write failed: %v", n, errs[k])
				}
			} else if !errors.Is(errs[k], safefile.ErrLookalike) {
				t.Errorf("%s: %v, want a look-alike refusal", n, errs[k])
			}
		}
		if created != 1 {
			t.Fatalf("round %d: %d of %v created", i, created, names)
		}
	}
}
