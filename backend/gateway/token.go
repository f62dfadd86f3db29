package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// minTokenLen is the shortest token accepted from an existing token file.
const minTokenLen = 16

// LoadOrCreateToken returns the operator token stored at path (normally
// $ATRIUM_HOME/gateway.token), creating it when missing or empty: 32 random
// bytes, hex-encoded (64 characters), in a file of mode 0600 inside a
// directory created with mode 0700. An existing token is re-read (surrounding
// whitespace ignored). On Unix a token file readable or writable by group or
// others is tightened to 0600; if that fails, the error says so and no token
// is returned. A token file that is not a single word of at least 16
// characters is an error (it is never overwritten).
func LoadOrCreateToken(path string) (string, error) {
	for attempt := 0; attempt < 3; attempt++ {
		tok, err := readToken(path)
		if err == nil {
			return tok, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if err := createToken(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		// Created, or another process won the race: read it back.
	}
	return "", fmt.Errorf("gateway token %s: could not create or read it", path)
}

// readToken returns fs.ErrNotExist (wrapped) when the file is missing or empty.
func readToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("gateway token %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("gateway token %s: not a regular file", path)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("gateway token %s is accessible by other users (mode %04o) and could not be restricted to 0600: %w",
				path, st.Mode().Perm(), err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("gateway token %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		// An empty file (for example a crash between create and write) is
		// replaced.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("gateway token %s: remove empty file: %w", path, err)
		}
		return "", fmt.Errorf("gateway token %s: empty: %w", path, fs.ErrNotExist)
	}
	if len(tok) < minTokenLen || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("gateway token %s: malformed (want one word of at least %d characters)", path, minTokenLen)
	}
	return tok, nil
}

// createToken writes a new token atomically: a private temp file, fsync,
// then a hard link to path that fails if path appeared meanwhile
// (fs.ErrExist). Where hard links are unsupported it falls back to an
// exclusive create.
func createToken(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("gateway token: create directory %s: %w", dir, err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return fmt.Errorf("gateway token: random: %w", err)
	}
	data := []byte(hex.EncodeToString(raw[:]) + "\n")

	tmp, err := os.CreateTemp(dir, ".gateway.token-*")
	if err != nil {
		return fmt.Errorf("gateway token: temp file in %s: %w", dir, err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return fmt.Errorf("gateway token: chmod %s: %w", tmpName, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("gateway token: write %s: %w", tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("gateway token: sync %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gateway token: close %s: %w", tmpName, err)
	}
	err = os.Link(tmpName, path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	// No hard links here (some filesystems): exclusive create instead.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("gateway token: create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("gateway token: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("gateway token: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gateway token: close %s: %w", path, err)
	}
	return nil
}
