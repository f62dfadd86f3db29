package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRename moves a note: the file, its version record, the index (found
// under the new path only) and the change event for both paths.
func TestRename(t *testing.T) {
	f := newWriteFixture(t, map[string]string{
		"memory/global/ideas.md": "# Ideas\n\nThe zebrafish aquarium plan for the lobby.\n",
	}, nil)
	ctx := context.Background()
	v := f.version(t, "memory/global/ideas.md")
	for len(f.changes) > 0 {
		<-f.changes
	}
	res, err := f.m.Rename(ctx, RenameRequest{From: "memory/global/ideas.md", To: "memory/global/plans/aquarium.md", BaseVersion: v, Writer: AdminWriter})
	if err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if res.From != "memory/global/ideas.md" || res.Path != "memory/global/plans/aquarium.md" || res.Version == "" || res.Version == v {
		t.Fatalf("result %+v (old version %s)", res, v)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory/global/ideas.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old name still there: %v", err)
	}
	if got := f.read(t, "memory/global/plans/aquarium.md"); !strings.Contains(got, "zebrafish") {
		t.Fatalf("new file: %q", got)
	}
	if got := f.version(t, "memory/global/plans/aquarium.md"); got != res.Version {
		t.Fatalf("version under the new path %q, want %q", got, res.Version)
	}
	if fv, ok, _ := f.vs.File(ctx, "memory/global/ideas.md"); ok {
		t.Fatalf("the old path kept a version record: %+v", fv)
	}
	rs := f.search(t, "zebrafish aquarium")
	if !hasPath(rs, "memory/global/plans/aquarium.md") || hasPath(rs, "memory/global/ideas.md") {
		t.Fatalf("search after rename: %+v", rs)
	}
	var ev ChangeEvent
	for ev.Reason != "rename" {
		select {
		case ev = <-f.changes:
		default:
			t.Fatal("no rename change event")
		}
	}
	if strings.Join(ev.Paths, ",") != "memory/global/ideas.md,memory/global/plans/aquarium.md" {
		t.Fatalf("event %+v", ev)
	}
	// A write with the version the old path had is stale under the new one.
	if _, err := f.m.Write(ctx, WriteRequest{Path: "memory/global/plans/aquarium.md", Content: "x\n", Mode: WriteReplace, BaseVersion: v, Writer: "writer"}); err != nil {
		t.Fatal(err)
	} else if cs := f.conflicts(t, ConflictFilter{Path: "memory/global/plans/aquarium.md"}); len(cs) != 1 {
		t.Fatalf("a write based on the pre-rename version made %d conflicts, want 1", len(cs))
	}
}

// TestRenameRefusals: every refusal leaves both names as they were.
func TestRenameRefusals(t *testing.T) {
	f := newWriteFixture(t, map[string]string{
		"memory/global/notes.md": "# Notes\n",
		"memory/global/todo.md":  "# Todo\n",
	}, func(o *Options) {
		o.Authorize = func(_ context.Context, writer, _, action, p string) error {
			if writer == "writer" && strings.HasPrefix(p, "memory/global/locked") {
				return errors.New("locked")
			}
			return nil
		}
	})
	ctx := context.Background()
	v := f.version(t, "memory/global/notes.md")
	cases := []struct {
		name string
		r    RenameRequest
		want error
	}{
		{"missing", RenameRequest{From: "memory/global/none.md", To: "memory/global/x.md", Writer: AdminWriter}, ErrNotFound},
		{"exists", RenameRequest{From: "memory/global/notes.md", To: "memory/global/todo.md", Writer: AdminWriter}, ErrExists},
		{"look-alike (Cyrillic о)", RenameRequest{From: "memory/global/notes.md", To: "memory/global/tоdo.md", Writer: AdminWriter}, ErrExists},
		{"look-alike (case)", RenameRequest{From: "memory/global/notes.md", To: "memory/global/TODO.md", Writer: AdminWriter}, ErrExists},
		{"same", RenameRequest{From: "memory/global/notes.md", To: "memory/global/notes.md", Writer: AdminWriter}, ErrInvalidInput},
		{"not markdown", RenameRequest{From: "memory/global/notes.md", To: "memory/global/notes.txt", Writer: AdminWriter}, ErrInvalidPath},
		{"escape", RenameRequest{From: "memory/global/notes.md", To: "../notes.md", Writer: AdminWriter}, ErrInvalidPath},
		{"conflict file", RenameRequest{From: "memory/global/notes.md", To: "memory/global/notes.conflict-20260101T000000Z.md", Writer: AdminWriter}, ErrInvalidPath},
		{"stale base", RenameRequest{From: "memory/global/notes.md", To: "memory/global/n2.md", BaseVersion: "admin=9", Writer: AdminWriter}, ErrConflict},
		{"bad base", RenameRequest{From: "memory/global/notes.md", To: "memory/global/n2.md", BaseVersion: "::", Writer: AdminWriter}, ErrInvalidInput},
		{"forbidden target", RenameRequest{From: "memory/global/notes.md", To: "memory/global/locked.md", BaseVersion: v, Writer: "writer"}, ErrForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.m.Rename(ctx, c.r)
			if !errors.Is(err, c.want) {
				t.Fatalf("Rename %+v: %v, want %v", c.r, err, c.want)
			}
			if got := f.read(t, "memory/global/notes.md"); got != "# Notes\n" {
				t.Fatalf("notes.md now %q", got)
			}
			if got := f.read(t, "memory/global/todo.md"); got != "# Todo\n" {
				t.Fatalf("todo.md now %q", got)
			}
		})
	}
	if got := f.version(t, "memory/global/notes.md"); got != v {
		t.Fatalf("refusals changed the version: %s, was %s", got, v)
	}
}

// TestRenameCrashBetweenLinkAndRemove: a crash after the new name was
// linked leaves the note under both names with its version record under
// the old one; a later rename from there (the file under the new name now
// exists) is refused, and removing the extra name by hand leaves the note.
func TestRenameCrashBetweenLinkAndRemove(t *testing.T) {
	f := newWriteFixture(t, map[string]string{"memory/global/a.md": "# A\n\nquokka census\n"}, nil)
	ctx := context.Background()
	v := f.version(t, "memory/global/a.md")
	crash := errors.New("simulated crash")
	f.m.renameHook = func(stage string) error {
		if stage == renameLinked {
			return crash
		}
		return nil
	}
	_, err := f.m.Rename(ctx, RenameRequest{From: "memory/global/a.md", To: "memory/global/b.md", BaseVersion: v, Writer: AdminWriter})
	if !errors.Is(err, crash) {
		t.Fatalf("Rename: %v, want the simulated crash", err)
	}
	for _, p := range []string{"memory/global/a.md", "memory/global/b.md"} {
		if got := f.read(t, p); got != "# A\n\nquokka census\n" {
			t.Fatalf("%s after the crash: %q", p, got)
		}
	}
	if got := f.version(t, "memory/global/a.md"); got != v {
		t.Fatalf("old path's version %s, want %s (the move was rolled back)", got, v)
	}
	f.m.renameHook = nil
	if _, err := f.m.Rename(ctx, RenameRequest{From: "memory/global/a.md", To: "memory/global/b.md", BaseVersion: v, Writer: AdminWriter}); !errors.Is(err, ErrExists) {
		t.Fatalf("rename onto the half-made name: %v, want ErrExists", err)
	}
}

// TestRenameMovesOpenConflicts: an open conflict on the note follows it to
// its new name and is resolved there (resolving writes the renamed file).
func TestRenameMovesOpenConflicts(t *testing.T) {
	f := newWriteFixture(t, map[string]string{"memory/global/plan.md": "# Plan\n\nv1\n"}, nil)
	ctx := context.Background()
	v := f.version(t, "memory/global/plan.md")
	f.write(t, WriteRequest{Path: "memory/global/plan.md", Content: "# Plan\n\nv2\n", Mode: WriteReplace, BaseVersion: v, Writer: "writer"})
	f.write(t, WriteRequest{Path: "memory/global/plan.md", Content: "# Plan\n\nv3\n", Mode: WriteReplace, BaseVersion: v, Writer: "analyst"})
	open := f.conflicts(t, ConflictFilter{Path: "memory/global/plan.md", State: "open"})
	if len(open) != 1 {
		t.Fatalf("open conflicts before the rename: %+v", open)
	}
	if _, err := f.m.Rename(ctx, RenameRequest{From: "memory/global/plan.md", To: "memory/global/roadmap.md", Writer: AdminWriter}); err != nil {
		t.Fatal(err)
	}
	if got := f.conflicts(t, ConflictFilter{Path: "memory/global/plan.md", State: "open"}); len(got) != 0 {
		t.Fatalf("open conflicts left on the old path: %+v", got)
	}
	moved := f.conflicts(t, ConflictFilter{Path: "memory/global/roadmap.md", State: "open"})
	if len(moved) != 1 || moved[0].ID != open[0].ID {
		t.Fatalf("open conflicts on the new path: %+v", moved)
	}
	if _, err := f.m.ResolveConflict(ctx, moved[0].ID, Resolution{Choice: "other"}); err != nil {
		t.Fatal(err)
	}
	if got := f.read(t, "memory/global/roadmap.md"); !strings.Contains(got, "v2") {
		t.Fatalf("resolved into the renamed file: %q", got)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory/global/plan.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("resolving recreated the old name: %v", err)
	}
}
