package cli

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/paths"
)

// TestServeWorkspace: `atrium serve` opens an existing workspace; a missing
// one (a mistyped --workspace or ATRIUM_WORKSPACE) is refused as the memory
// commands refuse it, unless --create-workspace asks for it; the default
// ~/Atrium is created on the first start only (once indexed, its absence
// is an error, not a fresh empty workspace).
func TestServeWorkspace(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir) // the default workspace is $HOME/Atrium
	home := filepath.Join(dir, "state")
	typo := filepath.Join(dir, "typo")
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"serve", "--home", home, "--workspace", typo}, nil},
		{[]string{"serve", "--home", home}, map[string]string{paths.EnvWorkspace: typo}},
		{[]string{"--home", home, "--workspace", typo}, nil}, // the desktop command, served without a display
	} {
		code, out, errOut := runCLI(t, tc.env, tc.args...)
		if code != 1 || !strings.Contains(errOut, "workspace "+typo+" does not exist") || !strings.Contains(errOut, "--create-workspace") || strings.Contains(out, "is running") {
			t.Errorf("%v %v: exit %d\nstdout: %s\nstderr: %s", tc.args, tc.env, code, out, errOut)
		}
		if _, err := os.Stat(typo); err == nil {
			t.Fatalf("%v created the mistyped workspace", tc.args)
		}
	}
	// Asked for: created.
	serveMain(t, nil, "serve", "--home", filepath.Join(dir, "state2"), "--workspace", typo, "--port", freePort(t), "--create-workspace")
	if st, err := os.Stat(typo); err != nil || !st.IsDir() {
		t.Fatalf("--create-workspace did not create it: %v", err)
	}

	// The default workspace on the first start: created.
	def := filepath.Join(dir, "Atrium")
	t.Run("default", func(t *testing.T) {
		serveMain(t, nil, "serve", "--home", home, "--port", freePort(t))
	})
	if st, err := os.Stat(def); err != nil || !st.IsDir() {
		t.Fatalf("the default workspace was not created on the first start: %v", err)
	}
	// Indexed, then gone: refused, not recreated empty.
	if err := os.Rename(def, def+".moved"); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, nil, "serve", "--home", home, "--port", freePort(t))
	if code != 1 || !strings.Contains(errOut, "is missing, but Atrium indexed it before") {
		t.Fatalf("a vanished default workspace: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(def); err == nil {
		t.Fatal("the vanished default workspace was recreated")
	}
}

// TestServePortInUse: a port another program holds is reported with the
// port, where it came from, and both ways to choose another (--port,
// gateway.port in config.json), not only "address already in use".
func TestServePortInUse(t *testing.T) {
	home, ws := workspace(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	want := []string{"port " + port + " (--port) on 127.0.0.1 is already in use by another program", "--port N", "gateway.port", filepath.Join(home, "config.json")}
	code, out, errOut := runCLI(t, nil, "serve", "--home", home, "--workspace", ws, "--port", port)
	for _, w := range want {
		if code != 1 || !strings.Contains(errOut, w) || strings.Contains(out, "is running") {
			t.Fatalf("serve on a busy --port: exit %d, want %q in\n%s", code, w, errOut)
		}
	}
	// The port from config.json.
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"gateway": {"port": `+port+`}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, nil, "serve", "--home", home, "--workspace", ws)
	if code != 1 || !strings.Contains(errOut, "port "+port+" (gateway.port in "+filepath.Join(home, "config.json")+")") || !strings.Contains(errOut, "--port N") {
		t.Fatalf("serve on a busy gateway.port: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "gateway.json")); err == nil {
		t.Fatal("a start that failed left gateway.json")
	}
	// The default port is OpenClaw's too: the message says so.
	msg := portInUse(syscall.EADDRINUSE, 0, 0, paths.Layout{Home: home}).Error()
	if !strings.Contains(msg, "port "+strconv.Itoa(config.DefaultPort)+" (the default)") || !strings.Contains(msg, "OpenClaw") {
		t.Fatalf("default port message: %s", msg)
	}
}
