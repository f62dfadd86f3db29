package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/versions"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// writeFixture is a fixture whose Manager has a version store on a real
// state.db and a fixed clock.
type writeFixture struct {
	*fixture
	vs *versions.Store
}

var writeNow = time.Date(2026, 3, 4, 9, 30, 15, 123e6, time.UTC)

func newWriteFixture(t *testing.T, files map[string]string, tweak func(*Options)) *writeFixture {
	t.Helper()
	db, err := statedb.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var vs *versions.Store
	f := newFixture(t, files, func(o *Options) {
		ws, _ := filepath.Abs(o.Workspace)
		if vs, err = versions.Open(db, versions.Options{Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		o.Versions = vs
		o.Now = func() time.Time { return writeNow }
		if tweak != nil {
			tweak(o)
		}
	})
	f.sync(t)
	return &writeFixture{fixture: f, vs: vs}
}

func (f *writeFixture) write(t *testing.T, r WriteRequest) WriteResult {
	t.Helper()
	res, err := f.m.Write(context.Background(), r)
	if err != nil {
		t.Fatalf("Write %+v: %v", r, err)
	}
	return res
}

func (f *writeFixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.ws, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *writeFixture) version(t *testing.T, rel string) string {
	t.Helper()
	v, err := f.m.Version(context.Background(), rel)
	if err != nil {
		t.Fatalf("Version %s: %v", rel, err)
	}
	return v
}

func (f *writeFixture) conflicts(t *testing.T, flt ConflictFilter) []Conflict {
	t.Helper()
	l, err := f.m.ListConflicts(context.Background(), flt)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// conflictFiles lists the conflict files in rel's folder.
func (f *writeFixture) conflictFiles(t *testing.T, dirRel string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(f.ws, filepath.FromSlash(dirRel)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if isConflictFile(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestWriteRules walks the SPEC §5.3 rules one case at a time, each on a
// fresh workspace: two writers (code-expert, writer) and the person.
func TestWriteRules(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(t *testing.T, f *writeFixture)
	}{
		{"fresh file, no base", func(t *testing.T, f *writeFixture) {
			res := f.write(t, WriteRequest{Path: "memory/global/project-status.md", Content: "# 状态\n\n项目路径改为 /srv/atrium。\n", Mode: WriteReplace, Writer: "code-expert"})
			if res.Version != "code-expert=1" || res.Merged || res.Pending || res.Conflict != nil {
				t.Fatalf("result %+v", res)
			}
			if got := f.read(t, "memory/global/project-status.md"); !strings.Contains(got, "/srv/atrium") {
				t.Fatalf("file = %q", got)
			}
			// Indexed before Write returned.
			if rs := f.search(t, "项目路径"); len(rs) == 0 || rs[0].Path != "memory/global/project-status.md" {
				t.Fatalf("search right after the write: %v", resultPaths(rs))
			}
			ev := <-drain(f.changes)
			if ev.Reason != "write" || !contains(ev.Paths, "memory/global/project-status.md") {
				t.Fatalf("change event %+v", ev)
			}
		}},
		{"equal base applies and bumps the writer", func(t *testing.T, f *writeFixture) {
			v1 := f.write(t, WriteRequest{Path: "memory/roles/code-expert/skills.md", Content: "Go\n", Mode: WriteReplace, Writer: "code-expert"}).Version
			res := f.write(t, WriteRequest{Path: "memory/roles/code-expert/skills.md", Content: "Go, SQLite\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v1})
			if res.Version != "code-expert=1,writer=1" || res.Conflict != nil || res.Merged {
				t.Fatalf("result %+v", res)
			}
			res = f.write(t, WriteRequest{Path: "memory/roles/code-expert/skills.md", Content: "Bleve", Mode: WriteAppend, Writer: "code-expert", BaseVersion: res.Version})
			if res.Version != "code-expert=2,writer=1" || res.Merged {
				t.Fatalf("append result %+v", res)
			}
			if got := f.read(t, "memory/roles/code-expert/skills.md"); got != "Go, SQLite\nBleve\n" {
				t.Fatalf("file = %q", got)
			}
			if l := f.conflicts(t, ConflictFilter{}); len(l) != 0 {
				t.Fatalf("conflicts: %+v", l)
			}
		}},
		{"stale base on a daily log merges the appends", func(t *testing.T, f *writeFixture) {
			log := "memory/roles/code-expert/2026-03-04.md"
			v1 := f.write(t, WriteRequest{Path: log, Content: "- 09:00 started", Mode: WriteAppend, Writer: "code-expert"}).Version
			f.write(t, WriteRequest{Path: log, Content: "- 09:05 code-expert line", Mode: WriteAppend, Writer: "code-expert", BaseVersion: v1})
			res := f.write(t, WriteRequest{Path: log, Content: "- 09:06 写手的记录", Mode: WriteAppend, Writer: "writer", BaseVersion: v1})
			if !res.Merged || res.Conflict != nil || res.Pending || res.Version != "code-expert=2,writer=1" {
				t.Fatalf("result %+v", res)
			}
			if got := f.read(t, log); got != "- 09:00 started\n- 09:05 code-expert line\n- 09:06 写手的记录\n" {
				t.Fatalf("log = %q", got)
			}
			if l := f.conflicts(t, ConflictFilter{}); len(l) != 0 {
				t.Fatalf("conflicts on a merged log: %+v", l)
			}
		}},
		{"stale base on a note keeps the last write and saves the other side", func(t *testing.T, f *writeFixture) {
			note := "memory/roles/code-expert/experience.md"
			v1 := f.write(t, WriteRequest{Path: note, Content: "alpha version of the note\n", Mode: WriteReplace, Writer: "code-expert"}).Version
			f.write(t, WriteRequest{Path: note, Content: "beta: the cache size is 512 MB\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v1})
			res := f.write(t, WriteRequest{Path: note, Content: "gamma: rewritten from alpha\n", Mode: WriteReplace, Writer: "code-expert", BaseVersion: v1, Session: "s-9"})
			if res.Conflict == nil || res.Pending || res.Merged || res.Version != "code-expert=2,writer=1" {
				t.Fatalf("result %+v", res)
			}
			c := res.Conflict
			if c.Kind != versions.KindOverwrite || c.Other != "beta: the cache size is 512 MB\n" || c.Base.String() != v1 ||
				c.Current.String() != "code-expert=1,writer=1" || c.Writer != "code-expert" || c.Session != "s-9" || c.State != versions.StateOpen {
				t.Fatalf("conflict %+v", c)
			}
			if got := f.read(t, note); got != "gamma: rewritten from alpha\n" {
				t.Fatalf("file = %q", got)
			}
			want := "memory/roles/code-expert/experience.conflict-20260304T093015.123Z.md"
			if c.File != want {
				t.Fatalf("conflict file %q, want %q", c.File, want)
			}
			if got := f.read(t, c.File); got != c.Other {
				t.Fatalf("conflict file holds %q", got)
			}
			// The conflict file is not memory: a full sync leaves it out of
			// the index, search and memory_get.
			f.sync(t)
			if rs := f.search(t, "cache size 512 MB"); hasPath(rs, c.File) {
				t.Fatalf("conflict file in search results: %v", resultPaths(rs))
			}
			if _, err := f.m.Get(ctx, GetOptions{Path: c.File}); !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("Get of the conflict file: %v", err)
			}
			files, _ := f.m.Files(ctx)
			for _, fi := range files {
				if isConflictFile(fi.Path) {
					t.Fatalf("conflict file indexed: %+v", fi)
				}
			}
			if l := f.conflicts(t, ConflictFilter{Path: note, State: versions.StateOpen}); len(l) != 1 || l[0].ID != c.ID {
				t.Fatalf("ListConflicts: %+v", l)
			}
			// A stale replace with the same text as the file loses nothing: no record.
			res = f.write(t, WriteRequest{Path: note, Content: "gamma: rewritten from alpha\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v1})
			if res.Conflict != nil {
				t.Fatalf("identical stale replace made a conflict: %+v", res.Conflict)
			}
			// A stale append to a note is applied to the current text (merged).
			res = f.write(t, WriteRequest{Path: note, Content: "delta appended", Mode: WriteAppend, Writer: "writer", BaseVersion: v1})
			if !res.Merged || res.Conflict != nil {
				t.Fatalf("stale append on a note: %+v", res)
			}
			if got := f.read(t, note); got != "gamma: rewritten from alpha\ndelta appended\n" {
				t.Fatalf("file = %q", got)
			}
		}},
		{"stale base on decision files waits for the person", func(t *testing.T, f *writeFixture) {
			for _, tc := range []struct{ path, initial string }{
				{"memory/global/decisions.md", "# Decisions\n\nWe use Bleve.\n"},
				{"memory/roles/analyst/choice.md", "---\ntype: decision\n---\nPostgres stays.\n"},
				{"memory/global/arch.md", "---\ntitle: x\ntags: [architecture, Decision]\n---\nOne binary.\n"},
			} {
				v1 := f.write(t, WriteRequest{Path: tc.path, Content: tc.initial, Mode: WriteReplace, Writer: AdminWriter}).Version
				v2 := f.write(t, WriteRequest{Path: tc.path, Content: tc.initial + "Amended by the analyst.\n", Mode: WriteReplace, Writer: "analyst", BaseVersion: v1}).Version
				res := f.write(t, WriteRequest{Path: tc.path, Content: "Competing rewrite.\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v1})
				if !res.Pending || res.Conflict == nil || res.Version != v2 || res.Conflict.Kind != versions.KindPending || res.Conflict.Other != "Competing rewrite.\n" {
					t.Fatalf("%s: result %+v", tc.path, res)
				}
				if got := f.read(t, tc.path); got != tc.initial+"Amended by the analyst.\n" {
					t.Fatalf("%s: a pending write changed the file: %q", tc.path, got)
				}
				if got := f.read(t, res.Conflict.File); got != "Competing rewrite.\n" {
					t.Fatalf("%s: conflict file = %q", tc.path, got)
				}
				// A stale append to a decision file waits too.
				res = f.write(t, WriteRequest{Path: tc.path, Content: "appended", Mode: WriteAppend, Writer: "writer", BaseVersion: v1})
				if !res.Pending || res.Conflict.Other != tc.initial+"Amended by the analyst.\nappended\n" {
					t.Fatalf("%s: stale append %+v", tc.path, res)
				}
				// A fresh write to a decision file applies.
				if res := f.write(t, WriteRequest{Path: tc.path, Content: "fresh", Mode: WriteAppend, Writer: "analyst", BaseVersion: v2}); res.Pending {
					t.Fatalf("%s: fresh write pending", tc.path)
				}
			}
			if n := len(f.conflicts(t, ConflictFilter{State: versions.StateOpen})); n != 6 {
				t.Fatalf("open conflicts = %d, want 6", n)
			}
		}},
		{"resolve each choice", func(t *testing.T, f *writeFixture) {
			note := "memory/global/shared-knowledge.md"
			mk := func(i int) Conflict {
				v1 := f.write(t, WriteRequest{Path: note, Content: "base text\n", Mode: WriteReplace, Writer: "writer"}).Version
				f.write(t, WriteRequest{Path: note, Content: "kept side one\n", Mode: WriteReplace, Writer: "analyst", BaseVersion: v1})
				res := f.write(t, WriteRequest{Path: note, Content: "last write wins\n", Mode: WriteReplace, Writer: "code-expert", BaseVersion: v1})
				if res.Conflict == nil {
					t.Fatalf("no conflict made (%d)", i)
				}
				return *res.Conflict
			}
			for i, tc := range []struct {
				res  Resolution
				want string
			}{
				{Resolution{Choice: "current"}, "last write wins\n"},
				{Resolution{Choice: "other"}, "kept side one\n"},
				{Resolution{Choice: "merged", Content: "合并后的文本 merged text\n"}, "合并后的文本 merged text\n"},
			} {
				c := mk(i)
				done, err := f.m.ResolveConflict(ctx, c.ID, tc.res)
				if err != nil {
					t.Fatalf("%s: %v", tc.res.Choice, err)
				}
				if got := f.read(t, note); got != tc.want {
					t.Fatalf("%s: file = %q, want %q", tc.res.Choice, got, tc.want)
				}
				if done.State != versions.StateResolved || done.Resolution == nil || done.Resolution.Choice != tc.res.Choice || done.Resolution.By != AdminWriter {
					t.Fatalf("%s: resolved record %+v", tc.res.Choice, done)
				}
				if v := f.version(t, note); v != done.Resolution.Version.String() {
					t.Fatalf("%s: version %s, resolution says %s", tc.res.Choice, v, done.Resolution.Version)
				}
				if tc.res.Choice != "current" && done.Resolution.Version["admin"] == 0 {
					t.Fatalf("%s: the resolution is not a write by admin: %s", tc.res.Choice, done.Resolution.Version)
				}
				if _, err := os.Stat(filepath.Join(f.ws, filepath.FromSlash(c.File))); !os.IsNotExist(err) {
					t.Fatalf("%s: conflict file still there (%v)", tc.res.Choice, err)
				}
				if _, err := f.m.ResolveConflict(ctx, c.ID, tc.res); !errors.Is(err, ErrConflict) {
					t.Fatalf("%s: second resolve: %v", tc.res.Choice, err)
				}
			}
			if rs := f.search(t, "合并后的文本"); len(rs) == 0 || rs[0].Path != note {
				t.Fatalf("merged text not searchable: %v", resultPaths(rs))
			}
			// Pending decision: "other" applies the proposal.
			v1 := f.write(t, WriteRequest{Path: "memory/global/decisions.md", Content: "A\n", Mode: WriteReplace, Writer: AdminWriter}).Version
			f.write(t, WriteRequest{Path: "memory/global/decisions.md", Content: "B\n", Mode: WriteReplace, Writer: "analyst", BaseVersion: v1})
			p := f.write(t, WriteRequest{Path: "memory/global/decisions.md", Content: "C\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v1})
			if _, err := f.m.ResolveConflict(ctx, p.Conflict.ID, Resolution{Choice: "other"}); err != nil {
				t.Fatal(err)
			}
			if got := f.read(t, "memory/global/decisions.md"); got != "C\n" {
				t.Fatalf("decision after choosing the proposal: %q", got)
			}
			for _, bad := range []struct {
				id  int64
				r   Resolution
				err error
			}{
				{999, Resolution{Choice: "current"}, ErrNotFound},
				{p.Conflict.ID, Resolution{Choice: "mine"}, ErrInvalidInput},
				{p.Conflict.ID, Resolution{Choice: "merged"}, ErrInvalidInput},
			} {
				if _, err := f.m.ResolveConflict(ctx, bad.id, bad.r); !errors.Is(err, bad.err) {
					t.Errorf("ResolveConflict(%d, %+v) = %v, want %v", bad.id, bad.r, err, bad.err)
				}
			}
		}},
		{"hand edit counts as a write by admin", func(t *testing.T, f *writeFixture) {
			note := "memory/roles/writer/characters.md"
			v1 := f.write(t, WriteRequest{Path: note, Content: "Mirela lives in Lisbon.\n", Mode: WriteReplace, Writer: "writer"}).Version
			writeFile(t, f.ws, note, "Mirela lives in Porto (edited by hand).\n")
			f.sync(t) // the indexer sees the new hash
			fv, ok, err := f.vs.File(ctx, note)
			if err != nil || !ok || fv.Vector.String() != "admin=1,writer=1" {
				t.Fatalf("version after the hand edit: %+v ok=%v err=%v", fv, ok, err)
			}
			if v := f.version(t, note); v != "admin=1,writer=1" {
				t.Fatalf("Version = %s", v)
			}
			// A write based on the version before the edit is stale: the
			// hand edit is saved, not lost.
			res := f.write(t, WriteRequest{Path: note, Content: "Mirela moved to Madrid.\n", Mode: WriteReplace, Writer: "writer", BaseVersion: v1})
			if res.Conflict == nil || res.Conflict.Other != "Mirela lives in Porto (edited by hand).\n" {
				t.Fatalf("write over a hand edit: %+v", res)
			}
			// An edit the indexer has not seen yet is counted by the next write.
			writeFile(t, f.ws, note, "Second hand edit.\n")
			res = f.write(t, WriteRequest{Path: note, Content: "after", Mode: WriteAppend, Writer: "writer", BaseVersion: res.Version})
			if !res.Merged || res.Version != "admin=2,writer=3" {
				t.Fatalf("append after an unseen hand edit: %+v", res)
			}
			// A file that was never written through Write starts at admin=1.
			if v := f.version(t, "MEMORY.md"); v != "admin=1" {
				t.Fatalf("Version of a hand-made file = %q", v)
			}
			if v := f.version(t, "memory/global/none.md"); v != "" {
				t.Fatalf("Version of a missing file = %q", v)
			}
			// Deleting a file by hand is an edit too.
			if err := os.Remove(filepath.Join(f.ws, filepath.FromSlash(note))); err != nil {
				t.Fatal(err)
			}
			if v := f.version(t, note); v != "admin=3,writer=3" {
				t.Fatalf("Version after a hand deletion = %q", v)
			}
		}},
		{"daily logs are append-only for roles", func(t *testing.T, f *writeFixture) {
			_, err := f.m.Write(ctx, WriteRequest{Path: "memory/2024-05-01.md", Content: "wiped", Mode: WriteReplace, Writer: "main"})
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("role replace of a daily log: %v", err)
			}
			f.write(t, WriteRequest{Path: "memory/2024-05-01.md", Content: "# fixed by hand\n", Mode: WriteReplace, Writer: AdminWriter})
		}},
		{"note appends a timestamped line to the role's daily log", func(t *testing.T, f *writeFixture) {
			day := time.Date(2026, 3, 5, 14, 7, 9, 0, time.FixedZone("CST", 8*3600))
			res, err := f.m.Note(ctx, NoteRequest{Role: "writer", Text: "完成了第一章的草稿\nsecond line", Now: day})
			if err != nil {
				t.Fatal(err)
			}
			if res.Path != "memory/roles/writer/2026-03-05.md" || res.Version != "writer=1" {
				t.Fatalf("note result %+v", res)
			}
			if _, err := f.m.Note(ctx, NoteRequest{Role: "writer", Text: "second note", Now: day.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			if got := f.read(t, res.Path); got != "- 14:07:09 完成了第一章的草稿\n  second line\n- 14:08:09 second note\n" {
				t.Fatalf("log = %q", got)
			}
			if rs := f.search(t, "第一章的草稿"); len(rs) == 0 || rs[0].Path != res.Path {
				t.Fatalf("note not searchable: %v", resultPaths(rs))
			}
			// Default clock (the Manager's).
			res, err = f.m.Note(ctx, NoteRequest{Role: "main", Text: "main note"})
			if err != nil || res.Path != "memory/roles/main/2026-03-04.md" {
				t.Fatalf("main note: %+v %v", res, err)
			}
			// OpenClaw layout (no memory/roles/): main's log is memory/YYYY-MM-DD.md.
			oc := newWriteFixture(t, map[string]string{"MEMORY.md": "# M\n", "memory/2026-03-03.md": "- x\n"}, nil)
			res, err = oc.m.Note(ctx, NoteRequest{Role: "main", Text: "openclaw note"})
			if err != nil || res.Path != "memory/2026-03-04.md" || oc.read(t, res.Path) != "- 09:30:15 openclaw note\n" {
				t.Fatalf("OpenClaw main note: %+v %v", res, err)
			}
			for _, bad := range []NoteRequest{{Role: "writer", Text: "  \n"}, {Role: "", Text: "x"}, {Role: "../x", Text: "x"}, {Role: ".hidden", Text: "x"}} {
				if _, err := f.m.Note(ctx, bad); !errors.Is(err, ErrInvalidInput) && !errors.Is(err, ErrInvalidPath) {
					t.Errorf("Note(%+v) = %v", bad, err)
				}
			}
		}},
		{"bad input is refused and writes nothing", func(t *testing.T, f *writeFixture) {
			for _, r := range []WriteRequest{
				{Path: "memory/a.md", Content: "x", Mode: "overwrite", Writer: "main"},
				{Path: "memory/a.md", Content: "x", Mode: WriteReplace},
				{Path: "memory/a.md", Content: "x", Mode: WriteReplace, Writer: "main", BaseVersion: "main=0"},
				{Path: "memory/a.md", Content: "x", Mode: WriteReplace, Writer: "main", BaseVersion: "garbage"},
				{Path: "memory/a.md", Content: "a\x00b", Mode: WriteReplace, Writer: "main"},
				{Path: "memory/a.md", Content: "\xff\xfe", Mode: WriteReplace, Writer: "main"},
				{Path: "memory/a.md", Content: "  ", Mode: WriteAppend, Writer: "main"},
				{Path: "memory/a.md", Content: strings.Repeat("x", MaxImportBytes+1), Mode: WriteReplace, Writer: "main"},
			} {
				if _, err := f.m.Write(ctx, r); !errors.Is(err, ErrInvalidInput) {
					t.Errorf("Write(mode %q writer %q base %q content %.10q) = %v, want ErrInvalidInput", r.Mode, r.Writer, r.BaseVersion, r.Content, err)
				}
			}
			if _, err := os.Stat(filepath.Join(f.ws, "memory", "a.md")); !os.IsNotExist(err) {
				t.Fatalf("a refused write left a file (%v)", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newWriteFixture(t, baseFiles, nil)
			drain(f.changes)
			tc.run(t, f)
		})
	}
}

// TestWritePathAttacks: every way out of memory Markdown is refused before
// anything is written, and nothing appears outside the workspace.
func TestWritePathAttacks(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	f := newWriteFixture(t, baseFiles, nil)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(f.ws, "memory", "roles", "escape")))
	must(os.Symlink(filepath.Join(f.ws, "memory", "global"), filepath.Join(f.ws, "memory", "roles", "alias")))
	must(os.Symlink(filepath.Join(outside, "target.md"), filepath.Join(f.ws, "memory", "link.md")))
	must(os.Symlink(filepath.Join(f.ws, "MEMORY.md"), filepath.Join(f.ws, "memory", "inner-link.md")))
	for _, p := range []string{
		"", "../x.md", "../../etc/passwd", "/etc/passwd.md", "memory/../../x.md", "memory/../AGENTS.md",
		`memory\roles\x.md`, "C:/x.md", "memory/roles/a/\x00.md", "memory/roles/a/\n.md",
		"AGENTS.md", "memory/x.txt", "memory/templates/role-template.md", "memory/.acl", "memory/.hidden/x.md",
		"memory/global/decisions.conflict-20260101T000000.000Z.md",
		"memory/roles/escape/x.md",     // folder symlink leaving the workspace
		"memory/roles/alias/x.md",      // folder symlink to another layer
		"memory/link.md",               // file symlink leaving the workspace
		"memory/inner-link.md",         // file symlink inside
		"memory/roles/escape/new/x.md", // folders would be created through the symlink
	} {
		_, err := f.m.Write(ctx, WriteRequest{Path: p, Content: "attack", Mode: WriteReplace, Writer: "main"})
		if !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Write(%q) = %v, want ErrInvalidPath", p, err)
		}
	}
	es, _ := os.ReadDir(outside)
	if len(es) != 0 {
		t.Fatalf("files written outside the workspace: %v", es)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory", "global", "x.md")); !os.IsNotExist(err) {
		t.Fatal("a write through a folder symlink landed in another layer")
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "MEMORY.md")); strings.Contains(string(b), "attack") {
		t.Fatal("a write through a file symlink changed its target")
	}
}

// TestWriteAuthorize: Authorize is asked first; a refusal is ErrForbidden
// and nothing is written or recorded.
func TestWriteAuthorize(t *testing.T) {
	ctx := context.Background()
	type call struct{ writer, session, action, path string }
	var calls []call
	deny := errors.New("role writer may not write memory/global/**")
	f := newWriteFixture(t, baseFiles, func(o *Options) {
		o.Authorize = func(_ context.Context, writer, session, action, path string) error {
			calls = append(calls, call{writer, session, action, path})
			if writer == "writer" && strings.HasPrefix(path, "memory/global/") {
				return deny
			}
			return nil
		}
	})
	_, err := f.m.Write(ctx, WriteRequest{Path: "memory/global/user-profile.md", Content: "x", Mode: WriteReplace, Writer: "writer", Session: "s1"})
	if !errors.Is(err, ErrForbidden) || !errors.Is(err, deny) {
		t.Fatalf("refused write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory", "global", "user-profile.md")); !os.IsNotExist(err) {
		t.Fatal("a refused write left a file")
	}
	if _, ok, _ := f.vs.File(ctx, "memory/global/user-profile.md"); ok {
		t.Fatal("a refused write left a version")
	}
	if _, err := f.m.Note(ctx, NoteRequest{Role: "writer", Text: "ok", Session: "s2"}); err != nil {
		t.Fatal(err)
	}
	want := []call{
		{"writer", "s1", ActionWrite, "memory/global/user-profile.md"},
		{"writer", "s2", ActionWrite, "memory/roles/writer/2026-03-04.md"},
	}
	if len(calls) != len(want) || calls[0] != want[0] || calls[1] != want[1] {
		t.Fatalf("Authorize calls %+v, want %+v", calls, want)
	}
	// Resolve asks too, as admin.
	v1 := f.write(t, WriteRequest{Path: "memory/roles/writer/a.md", Content: "1", Mode: WriteReplace, Writer: "writer"}).Version
	f.write(t, WriteRequest{Path: "memory/roles/writer/a.md", Content: "2", Mode: WriteReplace, Writer: "writer", BaseVersion: v1})
	c := f.write(t, WriteRequest{Path: "memory/roles/writer/a.md", Content: "3", Mode: WriteReplace, Writer: "writer", BaseVersion: v1}).Conflict
	calls = nil
	if _, err := f.m.ResolveConflict(ctx, c.ID, Resolution{Choice: "current"}); err != nil {
		t.Fatal(err)
	}
	// First may the caller see the conflict's file at all, then may it write.
	if len(calls) != 2 || calls[0] != (call{AdminWriter, "", ActionRead, "memory/roles/writer/a.md"}) ||
		calls[1] != (call{AdminWriter, "", ActionResolve, "memory/roles/writer/a.md"}) {
		t.Fatalf("Authorize calls of resolve: %+v", calls)
	}
	// A caller that may not read the file is told the conflict does not exist.
	f2 := c.ID
	f.m.opts.Authorize = func(ctx context.Context, writer, session, action, path string) error {
		return fmt.Errorf("no: %w", ErrForbidden)
	}
	if _, err := f.m.ResolveConflict(ctx, f2, Resolution{Choice: "current"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("resolve by a caller that may not read the file: %v, want ErrNotFound", err)
	}
}

// TestWriteWithoutVersionStore: writes need the version store.
func TestWriteWithoutVersionStore(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	_, err := f.m.Write(context.Background(), WriteRequest{Path: "memory/a.md", Content: "x", Mode: WriteReplace, Writer: "main"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Write without Options.Versions: %v", err)
	}
}

func TestDecisionAndLogRules(t *testing.T) {
	for _, c := range []struct {
		rel, text string
		want      bool
	}{
		{"memory/global/decisions.md", "", true},
		{"memory/global/decisions-2026.md", "", true},
		{"memory/global/decisions/db.md", "", true},
		{"memory/global/project-status.md", "", false},
		{"memory/roles/a/x.md", "---\ntype: decision\n---\nbody", true},
		{"memory/roles/a/x.md", "---\r\ntype: Decision\r\n---\r\nbody", true},
		{"memory/roles/a/x.md", "---\ntags: [a, decision]\n---\n", true},
		{"memory/roles/a/x.md", "---\ntags:\n  - x\n  - decision\n...\n", true},
		{"memory/roles/a/x.md", "---\ntags: a, decision\n---\n", true},
		{"memory/roles/a/x.md", "---\ntags: [decisions]\n---\n", false},
		{"memory/roles/a/x.md", "type: decision\n", false},      // no front matter
		{"memory/roles/a/x.md", "---\ntype: decision\n", false}, // unterminated
		{"memory/roles/a/x.md", "---\n: : bad\n---\n", false},   // bad YAML
		{"memory/roles/a/x.md", "# T\n---\ntype: decision\n---\n", false},
	} {
		if got := isDecision(c.rel, c.text); got != c.want {
			t.Errorf("isDecision(%q, %q) = %v", c.rel, c.text, got)
		}
	}
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"memory/2026-03-04.md", true},
		{"memory/roles/a/2026-03-04-standup.md", true},
		{"memory/roles/a/notes-2026-03-04.md", false},
		{"MEMORY.md", false},
	} {
		if got := isDailyLog(c.rel); got != c.want {
			t.Errorf("isDailyLog(%q) = %v", c.rel, got)
		}
	}
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"memory/x.conflict-20260304T093015.123Z.md", true},
		{"memory/x.conflict-20260304T093015.123Z-2.md", true},
		{"memory/x.conflict-20260304T093015Z.md", true},
		{"memory/x.conflict-notes.md", false},
		{"memory/conflict-resolution.md", false},
	} {
		if got := isConflictFile(c.rel); got != c.want {
			t.Errorf("isConflictFile(%q) = %v", c.rel, got)
		}
		if classify(c.rel).indexed == c.want {
			t.Errorf("classify(%q).indexed = %v", c.rel, !c.want)
		}
	}
}
