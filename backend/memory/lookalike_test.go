package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
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
	files["memory/global/memo.md"] = "# Memo\n"
	files["memory/global/会议记录.md"] = "# 会议记录\n"
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
		// UTS #39 confusables (issue 21 item 5).
		{"memory/global/n\u043etes.md", "memory/global/n\u043etes.md", "memory/global/notes.md"},
		{"memory/global/\u039dOTES.md", "memory/global/\u039dOTES.md", "memory/global/notes.md"},
		{"memory/global/rnemo.md", "memory/global/rnemo.md", "memory/global/memo.md"},
		{"memory/roles/wr\u0456ter/x.md", "memory/roles/wr\u0456ter", "memory/roles/writer"},
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
	// A role whose name looks like an existing role's (a Cyrillic і; rn
	// for m): a second principal nobody could tell from the first.
	_, err = f.m.CreateRole(ctx, CreateRoleRequest{Role: "wr\u0456ter", Description: "Writes"})
	refused("create role wrіter", err, "memory/roles/wr\u0456ter", "memory/roles/writer")
	_, err = f.m.CreateRole(ctx, CreateRoleRequest{Role: "c0de-expert", Description: "Codes"})
	refused("create role c0de-expert", err, "memory/roles/c0de-expert", "memory/roles/code-expert")
	if f.read(t, "memory/.acl") != acl {
		t.Error("the refused role changed the .acl")
	}

	// Import: the look-alike name counts as taken.
	for _, tc := range []struct{ name, want string }{
		{"ＮＯＴＥＳ.md", "memory/global/ＮＯＴＥＳ-1.md"},
		{"笔记（一）.txt", "memory/global/笔记（一）-1.md"},
		{"Notes.markdown", "memory/global/Notes-2.md"},
		{"NOTES.md", "memory/global/NOTES-3.md"},
		{"n\u043etes.md", "memory/global/n\u043etes-4.md"},
		{"RNEMO.md", "memory/global/RNEMO-1.md"},
		{"會議記錄.md", "memory/global/會議記錄.md"}, // Traditional: another name than 会议记录.md
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
	for i := range 21 {
		// Fullwidth capitals, a Cyrillic а, Greek capitals (Rho, Alpha, Nu).
		alike := []string{"ＰＬＡＮ%d.md", "pl\u0430n%d.md", "\u03a1L\u0391\u039d%d.md"}[i%3]
		names := []string{fmt.Sprintf("memory/global/plan%d.md", i), fmt.Sprintf("memory/global/"+alike, i)}
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

// Import renames a look-alike of an existing file, but a folder on the way
// that looks like an existing one is refused (folders are not renamed),
// and nothing is created before Authorize has allowed the name chosen.
func TestImportLookalikeFolderAndAuthorize(t *testing.T) {
	ctx := context.Background()
	var asked []string
	deny := ""
	f, _ := newSessionFixture(t, map[string]string{
		"memory/GLOBAL/notes.md":       "# Notes\n",
		"memory/roles/main/notes.md":   "# Notes\n",
		"memory/roles/main/NOTES-1.md": "# Notes 1\n",
	}, func(o *Options) {
		o.Authorize = func(ctx context.Context, writer, session, action, path string) error {
			if action == ActionImport {
				asked = append(asked, writer+" "+path)
				if path == deny {
					return errors.New("no")
				}
			}
			return nil
		}
	})
	_, err := f.m.Import(ctx, ImportRequest{Name: "x.md", Content: "# x\n", Layer: LayerGlobal})
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "memory/global looks like the existing memory/GLOBAL") {
		t.Errorf("import into memory/global beside memory/GLOBAL: %v, want ErrExists naming memory/GLOBAL", err)
	}
	if _, err := os.Lstat(filepath.Join(f.ws, "memory", "global")); err == nil {
		t.Error("memory/global was created")
	}
	// notes.md and notes-1.md are taken (the second by a look-alike): the
	// name asked for is Notes-2.md.
	deny = "memory/roles/main/Notes-2.md"
	_, err = f.m.Import(ctx, ImportRequest{Name: "Notes.md", Content: "# n\n"})
	if !errors.Is(err, ErrForbidden) || !slices.Equal(asked, []string{"admin memory/roles/main/Notes-2.md"}) {
		t.Errorf("import Notes.md: %v, asked %q; want ErrForbidden for memory/roles/main/Notes-2.md", err, asked)
	}
	if _, err := os.Lstat(filepath.Join(f.ws, "memory", "roles", "main", "Notes-2.md")); err == nil {
		t.Error("the refused import was written")
	}
	ents, _ := os.ReadDir(filepath.Join(f.ws, "memory", "roles", "main"))
	if len(ents) != 2 {
		t.Errorf("the folder holds %d entries after a refused import (a temp file left?)", len(ents))
	}
	// A refused import into a folder that does not exist creates none.
	deny, asked = "memory/roles/editor/x.md", nil
	if _, err := f.m.Import(ctx, ImportRequest{Name: "x.md", Content: "# x\n", Role: "editor"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("import as editor: %v, want ErrForbidden", err)
	}
	if _, err := os.Lstat(filepath.Join(f.ws, "memory", "roles", "editor")); err == nil {
		t.Error("the refused import created memory/roles/editor")
	}
}

// Concurrent imports of look-alike names each get a name of their own, and
// no two of the names look alike.
func TestImportLookalikeConcurrent(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, teamFiles(), nil)
	variants := []string{"notes.md", "NOTES.md", "ＮＯＴＥＳ.md", "n\u043etes.md", "\u039dOTES.md", "Notes.txt", "no\u200btes.md", "NОTES.markdown"}
	paths := make([]string, len(variants))
	errs := make([]error, len(variants))
	var wg sync.WaitGroup
	for i, v := range variants {
		wg.Go(func() {
			var res ImportResult
			res, errs[i] = f.m.Import(ctx, ImportRequest{Name: v, Content: "# " + v + "\n", Layer: LayerGlobal})
			paths[i] = res.Path
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("import %q: %v", variants[i], err)
		}
	}
	for i := range paths {
		for j := range i {
			if safefile.Alike(path.Base(paths[i]), path.Base(paths[j])) {
				t.Errorf("imports %q and %q landed as look-alikes %q and %q", variants[i], variants[j], paths[i], paths[j])
			}
		}
	}
}
