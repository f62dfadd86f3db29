package index

import (
	"context"
	"testing"
)

// Meta values survive a reopen, identity keys are refused, and values
// written in a bulk group are visible to the writer at once.
func TestMetaValues(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	if _, ok, err := s.MetaValue(ctx, "memory.sync"); ok || err != nil {
		t.Fatalf("unset value: ok=%v err=%v", ok, err)
	}
	for _, k := range []string{"", "dims", "provider", "generation"} {
		if err := s.SetMetaValue(ctx, k, "x"); err == nil {
			t.Errorf("SetMetaValue(%q) accepted", k)
		}
	}
	if err := s.SetMetaValue(ctx, "memory.sync", `{"lastSync":1}`); err != nil {
		t.Fatal(err)
	}
	s.BeginBulk()
	put(t, s, "memory/a.md", "alpha")
	if err := s.SetMetaValue(ctx, "memory.sync", `{"lastSync":2}`); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := s.MetaValue(ctx, "memory.sync"); v != `{"lastSync":2}` {
		t.Errorf("value in bulk = %q", v)
	}
	if err := s.EndBulk(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, testOpts(dir))
	defer s.Close()
	if !s.Compatible() {
		t.Errorf("meta value made the index incompatible")
	}
	if v, ok, err := s.MetaValue(ctx, "memory.sync"); !ok || err != nil || v != `{"lastSync":2}` {
		t.Errorf("after reopen: %q %v %v", v, ok, err)
	}
}

func TestHasFilesUnderAndCommits(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, testOpts(t.TempDir()))
	defer s.Close()
	c0 := s.Commits()
	put(t, s, "MEMORY.md", "root")
	put(t, s, "memoryx.md", "sibling name")
	if s.Commits() != c0+2 {
		t.Errorf("commits = %d, want %d", s.Commits(), c0+2)
	}
	if ok, err := s.HasFilesUnder(ctx, "memory"); ok || err != nil {
		t.Errorf("HasFilesUnder(memory) with no memory/ files = %v %v", ok, err)
	}
	s.BeginBulk()
	put(t, s, "memory/roles/a/x.md", "note")
	if ok, err := s.HasFilesUnder(ctx, "memory"); !ok || err != nil {
		t.Errorf("HasFilesUnder(memory) in bulk = %v %v", ok, err)
	}
	c1 := s.Commits()
	if err := s.EndBulk(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Commits() != c1+1 {
		t.Errorf("bulk group: commits = %d, want %d", s.Commits(), c1+1)
	}
	if ok, _ := s.HasFilesUnder(ctx, "memory/roles"); !ok {
		t.Errorf("HasFilesUnder(memory/roles) = false")
	}
	if ok, _ := s.HasFilesUnder(ctx, "memory/global"); ok {
		t.Errorf("HasFilesUnder(memory/global) = true")
	}
}
