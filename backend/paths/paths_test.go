package paths

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolvePrecedence(t *testing.T) {
	env := map[string]string{EnvHome: "/env/home", EnvWorkspace: "/env/ws"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name          string
		home, ws      string
		wantH, wantWS string
	}{
		{"flags win", "/flag/home", "/flag/ws", "/flag/home", "/flag/ws"},
		{"env next", "", "", "/env/home", "/env/ws"},
		{"mixed", "/flag/home", "", "/flag/home", "/env/ws"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Resolve(tt.home, tt.ws, getenv)
			if err != nil {
				t.Fatal(err)
			}
			if l.Home != tt.wantH || l.Workspace != tt.wantWS {
				t.Fatalf("got %+v, want home %s ws %s", l, tt.wantH, tt.wantWS)
			}
		})
	}
}

func TestResolveDefaults(t *testing.T) {
	t.Setenv("HOME", "/users/x")
	l, err := Resolve("", "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if l.Home != "/users/x/.atrium" || l.Workspace != "/users/x/Atrium" {
		t.Fatalf("defaults: %+v", l)
	}
}

func TestEnsureAndIndexDir(t *testing.T) {
	dir := t.TempDir()
	l := Layout{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws")}
	if err := l.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckWorkspace(); err == nil {
		t.Fatal("Ensure created the workspace, or CheckWorkspace accepted a missing one")
	}
	if created, err := l.EnsureWorkspace(); err != nil || !created {
		t.Fatalf("EnsureWorkspace: created=%v err=%v", created, err)
	}
	if created, err := l.EnsureWorkspace(); err != nil || created {
		t.Fatalf("EnsureWorkspace again: created=%v err=%v", created, err)
	}
	if err := l.CheckWorkspace(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(l.Home)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("home perms: %v %v", st.Mode(), err)
	}
	other := Layout{Home: l.Home, Workspace: filepath.Join(dir, "ws2")}
	if l.IndexDir() == other.IndexDir() {
		t.Fatal("two workspaces share one index dir")
	}
	if filepath.Dir(l.IndexDir()) != l.IndexRoot() {
		t.Fatalf("index dir %s not under %s", l.IndexDir(), l.IndexRoot())
	}
	if l.KeysDir() != filepath.Join(l.Home, "keys") {
		t.Fatalf("keys dir %s, want %s/keys", l.KeysDir(), l.Home)
	}
	if l.AuditDir() != filepath.Join(l.Home, "audit") {
		t.Fatalf("audit dir %s, want %s/audit", l.AuditDir(), l.Home)
	}
	if l.MediaDir() != filepath.Join(l.Home, "media") {
		t.Fatalf("media dir %s, want %s/media", l.MediaDir(), l.Home)
	}
}

func TestEnsureReadOnlyHome(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: permission bits are not enforced")
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o500); err != nil {
		t.Fatal(err)
	}
	l := Layout{Home: home, Workspace: filepath.Join(dir, "ws")}
	if err := l.Ensure(); err == nil {
		t.Fatal("read-only state dir accepted")
	}
}
