package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory/index"
)

// swap runs swapStoreLocked as its callers do, with writeMu held.
func (f *fixture) swap(t *testing.T, act func(dir string) error) (actErr, err error) {
	t.Helper()
	f.m.writeMu.Lock()
	defer f.m.writeMu.Unlock()
	return f.m.swapStoreLocked("test swap", act)
}

// keywordHit reports whether a keyword search for q finds path first.
func (f *fixture) keywordHit(t *testing.T, q, path string) bool {
	t.Helper()
	res, err := f.m.Search(context.Background(), SearchOptions{Query: q, Mode: ModeKeyword})
	if err != nil {
		t.Fatalf("keyword search %q: %v", q, err)
	}
	return len(res.Results) > 0 && res.Results[0].Path == path
}

// TestSwapStoreActFails: the act step runs on the closed index's
// directory; when it fails, the old index is opened again and serves
// searches, and the failure is returned as act's, not the reopen's.
func TestSwapStoreActFails(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	old := f.m.store
	boom := errors.New("act failed")
	actErr, err := f.swap(t, func(dir string) error {
		if dir != f.idx {
			t.Errorf("act ran on %q, want the index directory %q", dir, f.idx)
		}
		if _, err := old.Files(context.Background()); !errors.Is(err, index.ErrClosed) {
			t.Errorf("the old index during act: Files = %v, want index.ErrClosed", err)
		}
		return boom
	})
	if !errors.Is(actErr, boom) || err != nil {
		t.Fatalf("swap = (%v, %v), want (%v, nil)", actErr, err, boom)
	}
	if f.m.store == old {
		t.Fatal("the closed store was kept instead of reopened")
	}
	if !f.keywordHit(t, "QK-7731", "memory/2024-05-01.md") {
		t.Fatal("the reopened old index does not answer searches")
	}
	if st := f.m.Status(); st.State == StateError || st.Degraded != "" {
		t.Fatalf("status after a failed act = %+v", st)
	}
}

// TestSwapStoreKilledMidPromote: an act that stops half-way (here: the
// staged database moved in, the Bleve directories not swapped, as a kill
// between index.Promote's renames leaves them) reopens an index that
// serves the staged database: Open notices that the Bleve index belongs
// to another generation and refills it from SQLite.
func TestSwapStoreKilledMidPromote(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	writeFile(t, f.ws, "memory/2024-05-03.md", "# 2024-05-03\n\n- Ticket ZX-4410 opened for the staged index.\n")
	f.m.writeMu.Lock()
	staging, err := index.OpenStaging(f.m.ixOpts)
	if err == nil {
		_, err = f.m.scanLocked(context.Background(), staging)
		if cerr := staging.Close(); err == nil {
			err = cerr
		}
	}
	f.m.writeMu.Unlock()
	if err != nil {
		t.Fatalf("stage an index: %v", err)
	}
	if f.keywordHit(t, "ZX-4410", "memory/2024-05-03.md") {
		t.Fatal("the live index already has the staged note")
	}
	killed := errors.New("killed between the renames")
	actErr, err := f.swap(t, func(dir string) error {
		for _, suf := range []string{"-wal", "-shm"} {
			_ = os.Remove(filepath.Join(dir, index.DBName+suf))
		}
		if err := os.Rename(filepath.Join(dir, index.StagingDir, index.DBName), filepath.Join(dir, index.DBName)); err != nil {
			t.Errorf("move the staged database in: %v", err)
		}
		return killed
	})
	if !errors.Is(actErr, killed) || err != nil {
		t.Fatalf("swap = (%v, %v), want (%v, nil)", actErr, err, killed)
	}
	if !f.keywordHit(t, "ZX-4410", "memory/2024-05-03.md") {
		t.Fatal("the reopened index does not serve the staged database by keywords")
	}
	if !f.keywordHit(t, "QK-7731", "memory/2024-05-01.md") {
		t.Fatal("the reopened index lost a note the staged database has")
	}
}

// TestSwapStoreReopenFails: when the index cannot be opened again the
// swap says so (not as act's failure), Status says StateError, and the
// manager's calls answer errors instead of using the closed index.
func TestSwapStoreReopenFails(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	actErr, err := f.swap(t, func(dir string) error {
		// A regular file where the index directory was: Open cannot
		// create it again.
		if err := os.Rename(dir, dir+".moved"); err != nil {
			return err
		}
		return os.WriteFile(dir, []byte("not a directory"), 0o600)
	})
	if actErr != nil {
		t.Fatalf("act: %v", actErr)
	}
	if err == nil {
		t.Fatal("swap reported no error although the index could not be reopened")
	}
	if st := f.m.Status(); st.State != StateError || st.LastError == "" {
		t.Fatalf("status after a failed reopen = %+v, want %s with the reason", st, StateError)
	}
	if _, err := f.m.Search(context.Background(), SearchOptions{Query: "QK-7731", Mode: ModeKeyword}); err == nil {
		t.Fatal("a search succeeded on the closed index")
	}
}
