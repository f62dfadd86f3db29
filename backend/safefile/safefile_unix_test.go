//go:build unix

package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs f with the process umask set to mask, then restores it.
// The tests of this package do not run in parallel.
func withUmask(t *testing.T, mask int, f func()) {
	t.Helper()
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

func modeOf(t *testing.T, name string) fs.FileMode {
	t.Helper()
	info, err := os.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTemps fails when a temp file is left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}

// A replaced file keeps its mode, whatever the umask (issue 14 item 10: a
// memory write turned 0644 into 0600).
func TestReplaceKeepsMode(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []fs.FileMode{0o644, 0o600, 0o640, 0o664, 0o755, 0o444, 0o604, 0o775 | fs.ModeSetgid} {
		for _, mask := range []int{0o022, 0o077} {
			name := filepath.Join(dir, "notes.md")
			_ = os.Remove(name)
			if err := os.WriteFile(name, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(name, mode); err != nil {
				t.Fatal(err)
			}
			want := modeOf(t, name)
			withUmask(t, mask, func() {
				if err := WriteFile(name, []byte("new text"), Options{}); err != nil {
					t.Fatal(err)
				}
			})
			if got := modeOf(t, name); got != want {
				t.Errorf("mode %v under umask %04o became %v", want, mask, got)
			}
			if readFile(t, name) != "new text" {
				t.Errorf("content not replaced")
			}
		}
	}
	noTemps(t, dir)
}

// A replaced file keeps its owner and group when the process may set them
// (root here); the data is written either way.
func TestReplaceKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another user; the owner rule is exercised by root only")
	}
	dir := t.TempDir()
	name := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(name, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(name, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(name, []byte("new"), Options{}); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Lstat(name)
	uid, gid, _ := owner(info)
	if uid != 1234 || gid != 5678 || info.Mode() != 0o640 || readFile(t, name) != "new" {
		t.Fatalf("owner %d:%d mode %v content %q; want 1234:5678 0640 new", uid, gid, info.Mode(), readFile(t, name))
	}
	// setgid survives the chown (which clears it) because the mode is set after.
	if err := os.Chmod(name, 0o640|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(name, []byte("newer"), Options{}); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, name); got != 0o640|fs.ModeSetgid {
		t.Fatalf("mode %v, want setgid 0640", got)
	}
	// Exact (a secret) sets the mode but still keeps the owner: root
	// writing a person's config.json must not take it from them.
	if err := WriteFile(name, []byte("secret"), Options{Perm: 0o600, Exact: true}); err != nil {
		t.Fatal(err)
	}
	info, _ = os.Lstat(name)
	if uid, gid, _ = owner(info); uid != 1234 || gid != 5678 || info.Mode() != 0o600 {
		t.Fatalf("exact: owner %d:%d mode %v; want 1234:5678 0600", uid, gid, info.Mode())
	}
}

// A new file gets DefaultPerm minus the umask, as an editor would create
// it; Options.Perm and Options.Exact change that.
func TestNewFileMode(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		mask int
		o    Options
		want fs.FileMode
	}{
		{0o022, Options{}, 0o644},
		{0o002, Options{}, 0o664},
		{0o077, Options{}, 0o600},
		{0o022, Options{Perm: 0o600}, 0o600},
		{0o000, Options{Perm: 0o640}, 0o640},
		{0o077, Options{Perm: 0o644, Exact: true}, 0o644},
		{0o000, Options{Perm: 0o600, Exact: true}, 0o600},
	}
	for i, tc := range tests {
		for _, create := range []bool{false, true} {
			name := filepath.Join(dir, "n"+string(rune('a'+i))+map[bool]string{true: "c", false: "w"}[create]+".md")
			withUmask(t, tc.mask, func() {
				var err error
				if create {
					err = CreateFile(name, []byte("x"), tc.o)
				} else {
					err = WriteFile(name, []byte("x"), tc.o)
				}
				if err != nil {
					t.Fatal(err)
				}
			})
			if got := modeOf(t, name); got != tc.want {
				t.Errorf("umask %04o, %+v, create %v: mode %v, want %v", tc.mask, tc.o, create, got, tc.want)
			}
		}
	}
	noTemps(t, dir)
}

// Exact replaces the mode of the file it replaces (secrets stay 0600).
func TestExactReplace(t *testing.T) {
	name := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(name, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(name, []byte(`{"a":1}`), Options{Perm: 0o600, Exact: true}); err != nil {
		t.Fatal(err)
	}
	if got := modeOf(t, name); got != 0o600 {
		t.Fatalf("mode %v, want 0600", got)
	}
}

// Link and CreateFile never replace a file; the temp file is removed.
func TestLinkNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(name, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(name, []byte("theirs"), Options{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateFile over a file: %v, want fs.ErrExist", err)
	}
	if readFile(t, name) != "mine" {
		t.Fatal("the existing file was replaced")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tmp, err := NewTemp(root, "notes.md", []byte("theirs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.Link(""); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Link: %v", err)
	}
	if err := tmp.Link("notes-1.md"); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Link("notes-2.md"); err == nil {
		t.Fatal("a second Link succeeded")
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(dir, "notes-1.md")) != "theirs" || modeOf(t, filepath.Join(dir, "notes-1.md")) != 0o644 {
		t.Fatal("notes-1.md")
	}
	noTemps(t, dir)
}

// A destination that is a folder or a symlink is refused and left alone.
func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.md")
	if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"link.md", "folder.md"} {
		if err := WriteFile(filepath.Join(dir, n), []byte("x"), Options{}); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v, want ErrNotRegular", n, err)
		}
	}
	if readFile(t, outside) != "outside" || modeOf(t, filepath.Join(dir, "link.md"))&fs.ModeSymlink == 0 {
		t.Fatal("the symlink or its target changed")
	}
	noTemps(t, dir)
}

// A destination created (or re-moded) between NewTemp and Replace is
// replaced with its mode as it is at Replace.
func TestReplaceTakesTheModeAtReplace(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tmp, err := NewTemp(root, "notes.md", []byte("new"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	name := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(name, []byte("made meanwhile"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Replace(); err != nil {
		t.Fatal(err)
	}
	if readFile(t, name) != "new" || modeOf(t, name) != 0o640 {
		t.Fatalf("mode %v", modeOf(t, name))
	}
	noTemps(t, dir)
}
