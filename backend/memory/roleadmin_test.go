package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpdateRole edits a created role: description (front matter and the
// body line the template wrote), capabilities, the whole persona; other
// front matter keys stay; a stale base version is a conflict.
func TestUpdateRole(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, teamFiles(), nil)
	if _, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "analyst", Description: "Analyse database performance data", Capabilities: []string{"data"}}); err != nil {
		t.Fatal(err)
	}
	v0, err := f.m.Version(ctx, "memory/roles/analyst/config.md")
	if err != nil {
		t.Fatal(err)
	}
	desc, caps := "Forecasts sales with 销售 data", []string{"forecast", "销售", "forecast", " "}
	res, err := f.m.UpdateRole(ctx, UpdateRoleRequest{Role: "analyst", Description: &desc, Capabilities: &caps, BaseVersion: v0})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Changed, ",") != "description,capabilities" || res.Version == "" || res.Version == v0 {
		t.Fatalf("result %+v", res)
	}
	cfg := f.read(t, res.Path)
	fm, body, _, _, err := ParseFrontMatter(cfg)
	if err != nil || fm.Description != desc || strings.Join(fm.Capabilities, "|") != "forecast|销售" || fm.Type != "role" || fm.Created.IsZero() {
		t.Fatalf("front matter %+v %v\n%s", fm, err, cfg)
	}
	if !strings.Contains(body, desc) || strings.Contains(body, "Analyse database performance data") {
		t.Fatalf("body keeps the old description:\n%s", body)
	}
	roles, _ := f.m.ListRoles(ctx)
	for _, r := range roles {
		if r.Role == "analyst" && r.Description != desc {
			t.Fatalf("roles.list %+v", r)
		}
	}
	// The same again changes nothing and writes nothing.
	again, err := f.m.UpdateRole(ctx, UpdateRoleRequest{Role: "analyst", Description: &desc, BaseVersion: res.Version})
	if err != nil || len(again.Changed) != 0 || again.Version != res.Version {
		t.Fatalf("no-op update: %+v %v", again, err)
	}
	persona := "You are the analyst. Always answer with a chart description.\n"
	p, err := f.m.UpdateRole(ctx, UpdateRoleRequest{Role: "analyst", Persona: &persona})
	if err != nil || strings.Join(p.Changed, ",") != "persona" {
		t.Fatalf("persona: %+v %v", p, err)
	}
	if fm2, body2, _, _, _ := ParseFrontMatter(f.read(t, res.Path)); body2 != persona || fm2.Description != desc {
		t.Fatalf("after persona: %+v %q", fm2, body2)
	}
	// Stale base: no change is made without a version check.
	if _, err := f.m.UpdateRole(ctx, UpdateRoleRequest{Role: "analyst", Description: &persona, BaseVersion: v0}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale base: %v", err)
	}
	for _, c := range []struct {
		r    UpdateRoleRequest
		want error
	}{
		{UpdateRoleRequest{Role: "nobody", Description: &desc}, ErrNotFound},
		{UpdateRoleRequest{Role: "../x", Description: &desc}, ErrInvalidInput},
		{UpdateRoleRequest{Role: "analyst", Description: new(string)}, ErrInvalidInput},
		{UpdateRoleRequest{Role: "analyst", Capabilities: &[]string{strings.Repeat("x", 101)}}, ErrInvalidInput},
		{UpdateRoleRequest{Role: "analyst", Persona: ptr("a\x00b")}, ErrInvalidInput},
	} {
		if _, err := f.m.UpdateRole(ctx, c.r); !errors.Is(err, c.want) {
			t.Errorf("UpdateRole %+v: %v, want %v", c.r, err, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestDeleteRole: kept memory moves to the archive (not indexed, the role
// no longer listed), deleted memory is gone; main is refused.
func TestDeleteRole(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, teamFiles(), nil)
	if err := os.WriteFile(filepath.Join(f.ws, "memory/roles/writer/logo.png"), []byte("\x89PNG"), 0o644); err != nil {
		t.Fatal(err)
	}
	dry, err := f.m.DeleteRole(ctx, DeleteRoleRequest{Role: "writer", DryRun: true})
	if err != nil || dry.Files != 3 || dry.Notes != 2 || !dry.Kept || dry.ArchivePath != "" || dry.Bytes == 0 {
		t.Fatalf("dry run %+v %v", dry, err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory/roles/writer/drafts.md")); err != nil {
		t.Fatal("the dry run moved files")
	}
	for len(f.changes) > 0 {
		<-f.changes
	}
	res, err := f.m.DeleteRole(ctx, DeleteRoleRequest{Role: "writer"})
	if err != nil || res.ArchivePath != "memory/archive/roles/writer" || res.Files != 3 || !res.Kept {
		t.Fatalf("delete keeping memory: %+v %v", res, err)
	}
	if got := f.read(t, "memory/archive/roles/writer/drafts.md"); !strings.Contains(got, "pelicanvault") {
		t.Fatalf("archived drafts: %q", got)
	}
	if rs := f.search(t, "pelicanvault"); len(rs) != 0 {
		t.Fatalf("archived memory still found: %+v", rs)
	}
	if ev := <-f.changes; ev.Reason != "archive" || !contains(ev.Paths, "memory/roles/writer/drafts.md") {
		t.Fatalf("change %+v", ev)
	}
	roles, _ := f.m.ListRoles(ctx)
	for _, r := range roles {
		if r.Role == "writer" {
			t.Fatal("deleted role still listed")
		}
	}
	f.sync(t) // a full sync does not index the archive either
	if rs := f.search(t, "pelicanvault"); len(rs) != 0 {
		t.Fatalf("archived memory indexed by a sync: %+v", rs)
	}

	res, err = f.m.DeleteRole(ctx, DeleteRoleRequest{Role: "code-expert", DeleteMemory: true})
	if err != nil || res.Kept || res.ArchivePath != "" || res.Files != 1 {
		t.Fatalf("delete with memory: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory/roles/code-expert")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("folder still there: %v", err)
	}
	if rs := f.search(t, "xylophonequark"); len(rs) != 0 {
		t.Fatalf("deleted memory still found: %+v", rs)
	}
	for _, c := range []struct {
		role string
		want error
	}{{"main", ErrInvalidInput}, {"writer", ErrNotFound}, {"../global", ErrInvalidInput}, {"admin", ErrInvalidInput}} {
		if _, err := f.m.DeleteRole(ctx, DeleteRoleRequest{Role: c.role}); !errors.Is(err, c.want) {
			t.Errorf("DeleteRole %q: %v, want %v", c.role, err, c.want)
		}
	}
	// A role of the same name may be created again; a second deletion
	// keeps both archives.
	if _, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "writer", Description: "Writes again"}); err != nil {
		t.Fatal(err)
	}
	if res, err := f.m.DeleteRole(ctx, DeleteRoleRequest{Role: "writer"}); err != nil || res.ArchivePath != "memory/archive/roles/writer-1" {
		t.Fatalf("second delete: %+v %v", res, err)
	}
}
