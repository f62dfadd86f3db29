package index

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// kill simulates the process dying at this point: nothing pending is
// committed or applied, the handles are just dropped (an open SQLite
// transaction dies with its connection).
func kill(t *testing.T, s *Store) {
	t.Helper()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.btx != nil {
		_ = s.btx.Rollback()
		s.btx = nil
	}
	s.dropPending()
	_ = s.bl.Close()
	_ = s.db.Close()
	s.once.Do(func() { close(s.closed) }) // Close is a no-op from now on
}

// kw runs a keyword-only search (no query vector, no score floor).
func kw(t *testing.T, s *Store, text string) []Hit {
	t.Helper()
	hs, err := s.Search(context.Background(), Query{Text: text, MaxResults: 5, MinScore: -1})
	if err != nil {
		t.Fatalf("Search %q: %v", text, err)
	}
	return hs
}

func bleveDocs(t *testing.T, s *Store) int {
	t.Helper()
	n, err := s.bl.DocCount()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func journalRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM bleve_journal").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkConsistent asserts that Bleve holds exactly the SQLite chunks and
// that no journal rows are left.
func checkConsistent(t *testing.T, s *Store) {
	t.Helper()
	_, chunks, err := s.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := bleveDocs(t, s); d != chunks {
		t.Errorf("bleve docs = %d, SQLite chunks = %d", d, chunks)
	}
	if n := journalRows(t, s); n != 0 {
		t.Errorf("journal rows left: %d", n)
	}
}

// In bulk mode the writes of a group become searchable at EndBulk, with one
// Bleve batch for the group.
func TestBulkGroupAppliedAtEnd(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	put(t, s, "memory/old.md", "harbour lighthouse keeper")
	s.BeginBulk()
	put(t, s, "memory/a.md", "sailing boat regatta", "harbour crane")
	put(t, s, "memory/b.md", "mountain hiking trail")
	if err := s.DeleteFile(context.Background(), "memory/old.md"); err != nil {
		t.Fatal(err)
	}
	// The writer sees its own group ...
	if f, ok, err := s.File(context.Background(), "memory/a.md"); err != nil || !ok || f.Chunks != 2 {
		t.Fatalf("File in group: %+v %v %v", f, ok, err)
	}
	if got, err := s.CachedEmbeddings(context.Background(), []string{sha("mountain hiking trail")}); err != nil || len(got) != 1 {
		t.Fatalf("CachedEmbeddings in group: %d %v", len(got), err)
	}
	// ... the keyword index does not yet.
	if d := bleveDocs(t, s); d != 1 {
		t.Errorf("bleve docs before EndBulk = %d, want 1", d)
	}
	if err := s.EndBulk(context.Background()); err != nil {
		t.Fatal(err)
	}
	if hs := kw(t, s, "regatta"); len(hs) != 1 || hs[0].Path != "memory/a.md" {
		t.Errorf("regatta after EndBulk: %v", paths(hs))
	}
	if hs := kw(t, s, "lighthouse"); len(hs) != 0 {
		t.Errorf("deleted file still found: %v", paths(hs))
	}
	checkConsistent(t, s)
	// Outside bulk mode writes apply at once again.
	put(t, s, "memory/c.md", "quokka island")
	if hs := kw(t, s, "quokka"); len(hs) != 1 {
		t.Errorf("single write after bulk not searchable: %v", paths(hs))
	}
}

// A group reaching the operation limit is flushed without waiting for EndBulk.
func TestBulkFlushesAtLimit(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	s.bulkMaxOps = 3
	s.BeginBulk()
	put(t, s, "memory/a.md", "alpha one", "alpha two")
	if d := bleveDocs(t, s); d != 0 {
		t.Errorf("bleve docs after 2 ops = %d, want 0", d)
	}
	put(t, s, "memory/b.md", "beta one", "beta two")
	// The group is committed and its batch applied in the background.
	if fs, err := s.Files(context.Background()); err != nil || len(fs) != 2 {
		t.Errorf("files after 4 ops = %+v, %v; want a.md and b.md", fs, err)
	}
	settleApply(t, s)
	if d := bleveDocs(t, s); d != 4 {
		t.Errorf("bleve docs after 4 ops = %d, want 4", d)
	}
	if n := journalRows(t, s); n != 0 {
		t.Errorf("journal rows after flush: %d", n)
	}
	put(t, s, "memory/c.md", "gamma one")
	if err := s.EndBulk(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, s)
}

// settleApply waits for the keyword batch applied in the background, if any,
// and clears its journal rows, as the next flush would.
func settleApply(t *testing.T, s *Store) {
	t.Helper()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.awaitApply(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

// While a group's batch is applied in the background, the next group
// deletes its chunks. Clearing the first batch's journal rows must keep the
// rows the second group wrote for the same chunks: killed before the second
// batch reaches Bleve, the replay deletes them.
func TestBulkClearKeepsRejournaledRows(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	s.bulkMaxOps = 2
	s.BeginBulk()
	put(t, s, "memory/a.md", "sailing boat regatta", "harbour crane") // flushed: applied in the background
	s.bulkMaxOps = 100
	put(t, s, "memory/a.md", "quiet reading room") // deletes both, adds one
	s.wmu.Lock()
	again := slices.Clone(s.pendIDs)
	err := s.commitBulk()
	if err == nil {
		err = s.awaitApply(context.Background(), again)
	}
	s.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if n := journalRows(t, s); n != 3 {
		t.Fatalf("journal rows = %d, want 3 (the second group's 2 deletes and 1 index)", n)
	}
	kill(t, s)

	s2 := mustOpen(t, testOpts(dir))
	if hs := kw(t, s2, "regatta crane"); len(hs) != 0 {
		t.Errorf("deleted chunks found after recovery: %v", paths(hs))
	}
	if hs := kw(t, s2, "reading"); len(hs) != 1 {
		t.Errorf("reading after recovery: %v", paths(hs))
	}
	if d := bleveDocs(t, s2); d != 1 {
		t.Errorf("bleve docs = %d, want 1", d)
	}
	checkConsistent(t, s2)
}

// A file whose write fails inside a group is undone alone; the other files
// of the group are kept.
func TestBulkFailedFileUndoneAlone(t *testing.T) {
	s := mustOpen(t, testOpts(t.TempDir()))
	if _, err := s.db.Exec(`CREATE TRIGGER fail_bad BEFORE INSERT ON files WHEN NEW.path = 'memory/bad.md'
		BEGIN SELECT RAISE(ABORT, 'test failure'); END`); err != nil {
		t.Fatal(err)
	}
	s.BeginBulk()
	put(t, s, "memory/a.md", "sailing boat regatta")
	var cs []ChunkRecord
	for _, tx := range []string{"poisoned chunk one", "poisoned chunk two"} {
		cs = append(cs, ChunkRecord{StartLine: 1, EndLine: 1, Text: tx, Hash: sha(tx), Vector: toyVec(tx, testDims)})
	}
	err := s.PutFile(context.Background(), FileRecord{Path: "memory/bad.md", Hash: "x", Layer: "role", Role: "main"}, cs)
	if err == nil || !strings.Contains(err.Error(), "test failure") {
		t.Fatalf("PutFile bad.md: %v, want the trigger's failure", err)
	}
	put(t, s, "memory/b.md", "mountain hiking trail")
	if err := s.EndBulk(context.Background()); err != nil {
		t.Fatal(err)
	}
	fs, err := s.Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 || fs[0].Path != "memory/a.md" || fs[1].Path != "memory/b.md" {
		t.Errorf("files = %+v, want a.md and b.md", fs)
	}
	if hs := kw(t, s, "poisoned"); len(hs) != 0 {
		t.Errorf("undone file found: %v", paths(hs))
	}
	if got, _ := s.CachedEmbeddings(context.Background(), []string{sha("poisoned chunk one")}); len(got) != 0 {
		t.Errorf("undone file left %d cache entries", len(got))
	}
	checkConsistent(t, s)
}

// A process killed after a group's SQLite commit but before its Bleve batch
// was applied leaves journal rows; the next Open applies them.
func TestBulkKillBetweenCommitAndKeywordApply(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	put(t, s, "memory/keep.md", "quiet library", "old harbour")
	s.BeginBulk()
	put(t, s, "memory/a.md", "sailing boat regatta", "harbour crane")
	put(t, s, "memory/keep.md", "quiet reading room") // replaces two chunks
	put(t, s, "memory/b.md", "mountain hiking trail")
	s.wmu.Lock()
	if err := s.commitBulk(); err != nil {
		s.wmu.Unlock()
		t.Fatal(err)
	}
	s.wmu.Unlock()
	if n := journalRows(t, s); n != 6 {
		t.Fatalf("journal rows after commit = %d, want 6 (4 index + 2 delete)", n)
	}
	kill(t, s)

	s2 := mustOpen(t, testOpts(dir))
	for q, want := range map[string]string{"regatta": "memory/a.md", "hiking": "memory/b.md", "reading": "memory/keep.md"} {
		if hs := kw(t, s2, q); len(hs) != 1 || hs[0].Path != want {
			t.Errorf("%s after recovery: %v, want %s", q, paths(hs), want)
		}
	}
	if hs := kw(t, s2, "library"); len(hs) != 0 {
		t.Errorf("replaced chunk still found: %v", paths(hs))
	}
	if d := bleveDocs(t, s2); d != 4 {
		t.Errorf("bleve docs = %d, want 4", d)
	}
	checkConsistent(t, s2)
}

// A process killed before a group's commit loses the group on both sides;
// what was committed before stays.
func TestBulkKillBeforeCommit(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	put(t, s, "memory/keep.md", "quiet library")
	s.BeginBulk()
	put(t, s, "memory/a.md", "sailing boat regatta")
	put(t, s, "memory/keep.md", "quiet reading room")
	kill(t, s)

	s2 := mustOpen(t, testOpts(dir))
	fs, err := s2.Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Path != "memory/keep.md" || fs[0].Chunks != 1 {
		t.Errorf("files = %+v, want keep.md alone", fs)
	}
	if hs := kw(t, s2, "library"); len(hs) != 1 {
		t.Errorf("committed chunk lost: %v", paths(hs))
	}
	if hs := kw(t, s2, "regatta reading"); len(hs) != 0 {
		t.Errorf("uncommitted group found: %v", paths(hs))
	}
	checkConsistent(t, s2)
}

// Closing a Store in bulk mode flushes the open group.
func TestBulkCloseFlushes(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir))
	s.BeginBulk()
	put(t, s, "memory/a.md", "sailing boat regatta")
	if err := s.TouchFile(context.Background(), "memory/a.md", 42, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, testOpts(dir))
	if f, ok, err := s2.File(context.Background(), "memory/a.md"); err != nil || !ok || f.MTime != 42 || f.Size != 7 {
		t.Errorf("file after close: %+v %v %v", f, ok, err)
	}
	if hs := kw(t, s2, "regatta"); len(hs) != 1 {
		t.Errorf("regatta after close: %v", paths(hs))
	}
	checkConsistent(t, s2)
}
