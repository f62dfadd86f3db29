//go:build unix

package memory

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Every way the engine writes a file keeps the mode (and, as root, the
// owner) of a file it replaces and gives a new file the mode an editor
// would (0666 minus the umask): memory_write (replace and append),
// memory_note, conflict resolution, the .acl rule of a new role; and new
// files from import, conflict copies, the role template (issue 14 item 10:
// a write turned 0644 into 0600; new imports and conflict copies were
// 0600).
func TestWritesKeepFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx := context.Background()
	f, _ := newSessionFixture(t, teamFiles(), nil)
	abs := func(rel string) string { return filepath.Join(f.ws, filepath.FromSlash(rel)) }
	mode := func(rel string) fs.FileMode {
		t.Helper()
		info, err := os.Lstat(abs(rel))
		if err != nil {
			t.Fatal(err)
		}
		return info.Mode()
	}
	chmod := func(rel string, m fs.FileMode) {
		t.Helper()
		if err := os.Chmod(abs(rel), m); err != nil {
			t.Fatal(err)
		}
	}

	// Replace and append keep 0644, 0640, 0600 and 0664.
	for _, m := range []fs.FileMode{0o644, 0o640, 0o600, 0o664} {
		rel := "memory/global/project-status.md"
		chmod(rel, m)
		f.write(t, WriteRequest{Path: rel, Content: "# Project status\n\nreplaced\n", Mode: WriteReplace, Writer: AdminWriter})
		if got := mode(rel); got != m {
			t.Errorf("replace: %v became %v", m, got)
		}
		f.write(t, WriteRequest{Path: rel, Content: "appended", Mode: WriteAppend, Writer: AdminWriter})
		if got := mode(rel); got != m {
			t.Errorf("append: %v became %v", m, got)
		}
	}
	// A new file from memory_write, memory_note and import: 0644 under umask 022.
	f.write(t, WriteRequest{Path: "memory/roles/writer/new.md", Content: "new", Mode: WriteReplace, Writer: "writer"})
	nres, err := f.m.Note(ctx, NoteRequest{Role: "writer", Text: "a fact"})
	if err != nil {
		t.Fatal(err)
	}
	note := nres.Path
	imp, err := f.m.Import(ctx, ImportRequest{Name: "导入的笔记.md", Content: "# 笔记\n\n内容\n", Layer: LayerGlobal})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"memory/roles/writer/new.md", note, imp.Path} {
		if got := mode(rel); got != 0o644 {
			t.Errorf("new file %s: mode %v, want 0644", rel, got)
		}
	}
	// Under umask 077 a new file is 0600; a replaced 0644 stays 0644.
	syscall.Umask(0o077)
	f.write(t, WriteRequest{Path: "memory/roles/writer/private.md", Content: "mine", Mode: WriteReplace, Writer: "writer"})
	f.write(t, WriteRequest{Path: "memory/roles/writer/new.md", Content: "again", Mode: WriteReplace, Writer: "writer"})
	if mode("memory/roles/writer/private.md") != 0o600 || mode("memory/roles/writer/new.md") != 0o644 {
		t.Errorf("umask 077: new %v (want 0600), replaced %v (want 0644)", mode("memory/roles/writer/private.md"), mode("memory/roles/writer/new.md"))
	}
	syscall.Umask(0o022)

	// A stale replace leaves a conflict copy (a new file: 0644) and keeps
	// the replaced file's mode; resolving it keeps the mode too.
	rel := "memory/roles/writer/style-guide.md"
	chmod(rel, 0o640)
	v0 := f.version(t, rel)
	f.write(t, WriteRequest{Path: rel, Content: "# Style\n\nfirst\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v0})
	res := f.write(t, WriteRequest{Path: rel, Content: "# Style\n\nsecond\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v0})
	if res.Conflict == nil {
		t.Fatalf("no conflict: %+v", res)
	}
	if mode(res.Conflict.File) != 0o644 || mode(rel) != 0o640 {
		t.Errorf("conflict copy %v (want 0644), file %v (want 0640)", mode(res.Conflict.File), mode(rel))
	}
	if _, err := f.m.ResolveConflict(ctx, res.Conflict.ID, Resolution{Choice: "other"}); err != nil {
		t.Fatal(err)
	}
	if mode(rel) != 0o640 {
		t.Errorf("resolved: %v, want 0640", mode(rel))
	}

	// A new role: the .acl keeps its mode, the template and config are new files.
	chmod("memory/.acl", 0o640)
	if _, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "analyst", Description: "Analyse data"}); err != nil {
		t.Fatal(err)
	}
	if mode("memory/.acl") != 0o640 || mode(RoleTemplatePath) != 0o644 || mode("memory/roles/analyst/config.md") != 0o644 {
		t.Errorf(".acl %v (want 0640), template %v, config %v (want 0644)", mode("memory/.acl"), mode(RoleTemplatePath), mode("memory/roles/analyst/config.md"))
	}
	if !strings.Contains(f.read(t, "memory/.acl"), "roles/analyst/**") {
		t.Error("the .acl has no rule for analyst")
	}

	// As root: the owner and group of a replaced file stay.
	if os.Geteuid() == 0 {
		rel := "memory/global/user-profile.md"
		if err := os.Chown(abs(rel), 1234, 5678); err != nil {
			t.Fatal(err)
		}
		f.write(t, WriteRequest{Path: rel, Content: "# 用户画像\n\nupdated\n", Mode: WriteReplace, Writer: AdminWriter})
		st := mustStat(t, abs(rel))
		if st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("owner %d:%d, want 1234:5678", st.Uid, st.Gid)
		}
	}
}

func mustStat(t *testing.T, name string) *syscall.Stat_t {
	t.Helper()
	info, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t)
}
