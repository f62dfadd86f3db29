package gateway

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestLoadOrCreateToken(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permissions")
	}
	dir := filepath.Join(t.TempDir(), "home")
	path := filepath.Join(dir, "gateway.token")

	tok, err := LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(tok); err != nil || len(b) != 32 {
		t.Fatalf("token %q: want 64 hex characters", tok)
	}
	assertMode(t, path, 0o600)
	assertMode(t, dir, 0o700)

	again, err := LoadOrCreateToken(path)
	if err != nil || again != tok {
		t.Fatalf("re-read %q, %v; want %q", again, err, tok)
	}

	// Too open: tightened, same token.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if again, err := LoadOrCreateToken(path); err != nil || again != tok {
		t.Fatalf("after chmod 644: %q, %v", again, err)
	}
	assertMode(t, path, 0o600)

	// A hand-written token is kept; garbage is refused, never overwritten.
	if err := os.WriteFile(path, []byte("  my-own-token-1234567890\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadOrCreateToken(path); err != nil || got != "my-own-token-1234567890" {
		t.Fatalf("custom token: %q, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(path); err == nil {
		t.Fatal("malformed token accepted")
	}

	// An empty file is replaced by a fresh token.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh, err := LoadOrCreateToken(path)
	if err != nil || len(fresh) != 64 || fresh == tok {
		t.Fatalf("empty file: %q, %v", fresh, err)
	}
	assertMode(t, path, 0o600)
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Fatalf("%s mode %04o, want %04o", path, got, want)
	}
}
