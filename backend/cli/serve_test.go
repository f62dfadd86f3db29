package cli

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/gwid"
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

// TestServeBind: `atrium serve --bind 127.0.0.2` prints the HTTPS URL and
// the certificate's fingerprint words, serves HTTPS there with the
// certificate gateway.json names (a pinned client connects) and plain
// HTTP on 127.0.0.1; a bad --bind is a usage error naming what is accepted.
func TestServeBind(t *testing.T) {
	if lo, err := net.InterfaceByName("lo"); err == nil && lo.Flags&net.FlagMulticast != 0 {
		t.Skip("lo carries multicast here: the app would announce itself by mDNS on it")
	}
	home, ws := workspace(t)
	port := freePort(t)
	out := serveMain(t, nil, "serve", "--home", home, "--workspace", ws, "--port", port, "--bind", "127.0.0.2")
	info, err := atrium.ReadGatewayInfo(filepath.Join(home, "gateway.json"))
	if err != nil {
		t.Fatal(err)
	}
	lanURL := "https://127.0.0.2:" + port + "/"
	banner := out.String()
	if !strings.Contains(banner, lanURL+" (HTTPS only)") || info.TLSFingerprintWords == "" ||
		!strings.Contains(banner, info.TLSFingerprintWords) || !strings.Contains(banner, info.TLSFingerprint) {
		t.Fatalf("banner lacks the HTTPS URL or the fingerprint %q:\n%s", info.TLSFingerprintWords, banner)
	}
	fp, err := gwid.ParseFingerprint(info.TLSFingerprint)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: gwid.PinnedClientConfig(fp)}}
	resp, err := hc.Get(lanURL + "healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("pinned HTTPS: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://127.0.0.1:" + port + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain HTTP on 127.0.0.1: %v %v", resp, err)
	}
	resp.Body.Close()

	code, _, errOut := runCLI(t, nil, "serve", "--home", t.TempDir(), "--workspace", ws, "--bind", "0.0.0.0")
	if code != 1 || !strings.Contains(errOut, `--bind: gateway.bind "0.0.0.0": use "lan"`) {
		t.Fatalf("--bind 0.0.0.0: exit %d\n%s", code, errOut)
	}
}

// TestServeBindBusy: the port taken on the bound address (free on
// 127.0.0.1) is reported with that address, not as 127.0.0.1's.
func TestServeBindBusy(t *testing.T) {
	home, ws := workspace(t)
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	code, out, errOut := runCLI(t, nil, "serve", "--home", home, "--workspace", ws, "--port", port, "--bind", "127.0.0.2")
	if code != 1 || !strings.Contains(errOut, "gateway.bind 127.0.0.2: cannot listen on 127.0.0.2:"+port) ||
		strings.Contains(errOut, "on 127.0.0.1 is already in use") || strings.Contains(out, "is running") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
