package statedb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A state.db that cannot be written is refused at Open with a clear error,
// not at the first chat message (QA: the app said it was running, then
// every write failed with "attempt to write a readonly database").
func TestOpenRefusesReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t(x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Root ignores file modes: make the file immutable instead.
		if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
			t.Skipf("running as root and chattr +i failed (%v: %s): no read-only file can be made here", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", path).Run() })
	}
	if db, err := Open(path); err == nil || !strings.Contains(err.Error(), "not writable") {
		if db != nil {
			db.Close()
		}
		t.Fatalf("Open of a read-only state.db: %v, want a 'not writable' error", err)
	}
}

func TestOpenWritable(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t(x); INSERT INTO t VALUES(1)"); err != nil {
		t.Fatal(err)
	}
}
