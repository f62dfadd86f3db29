package nodehost

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func mode(t *testing.T, name string) os.FileMode {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestStateKeyCreatedOnceAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	s, err := OpenState(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if m := mode(t, dir); m != 0o700 {
			t.Errorf("state dir mode %v, want 0700", m)
		}
		if m := mode(t, filepath.Join(dir, KeyFileName)); m != 0o600 {
			t.Errorf("key mode %v, want 0600", m)
		}
	}
	if len(s.DeviceID()) != 64 {
		t.Fatalf("deviceId %q", s.DeviceID())
	}
	s2, err := OpenState(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.DeviceID() != s.DeviceID() {
		t.Fatalf("reopened state has another key: %s vs %s", s2.DeviceID(), s.DeviceID())
	}
	// The key signs what the device package verifies.
	msg := []byte("hello")
	sig, err := s2.Key().Sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Key().Public().Verify(msg, sig); err != nil {
		t.Fatal(err)
	}
}

func TestStateCorruptKeyIsAnErrorAndKept(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, KeyFileName)
	bad := []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
	if err := os.WriteFile(name, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenState(dir, nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenState: %v, want ErrCorrupt", err)
	}
	got, _ := os.ReadFile(name)
	if string(got) != string(bad) {
		t.Fatal("the corrupt key file was changed")
	}
}

func TestStateConfigAtomicPrivateAndReloaded(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenState(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(c *Config) {
		c.GatewayURL, c.GatewayID, c.TLSSHA256 = "wss://127.0.0.2:1/ws", "ab", "cd"
		c.Tokens = map[string]string{"node": "secret"}
	}); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if m := mode(t, filepath.Join(dir, ConfigFileName)); m != 0o600 {
			t.Errorf("node.json mode %v, want 0600", m)
		}
	}
	c := s.Config()
	c.Tokens["node"] = "changed by the caller"
	if s.Config().Tokens["node"] != "secret" {
		t.Fatal("Config returned the state's own map")
	}
	s2, err := OpenState(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Config(); got.GatewayURL != "wss://127.0.0.2:1/ws" || got.Tokens["node"] != "secret" {
		t.Fatalf("reloaded %+v", got)
	}
	// A corrupt node.json is an error and is left as it is.
	bad := []byte(`{"gatewayUrl": 3}`)
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenState(dir, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt node.json: %v, want ErrCorrupt", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ConfigFileName)); string(got) != string(bad) {
		t.Fatal("corrupt node.json was replaced")
	}
}

func TestStateSecretsOpenToOthersAreClosed(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix modes")
	}
	dir := t.TempDir()
	if _, err := OpenState(dir, nil); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, KeyFileName)
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenState(dir, nil); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, key); m != 0o600 {
		t.Errorf("key mode %v after reopen, want 0600", m)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("dir mode %v after reopen, want 0700", m)
	}
}
