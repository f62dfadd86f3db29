//go:build unix

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/atrium"
)

// TestDeviceCommandsAnyWorkspace: `atrium pair` and `atrium nodes` reach
// the running app of the state dir (--home; its gateway.json says where)
// whichever workspace it serves: here not the default one, not
// $ATRIUM_WORKSPACE's, and not the one a --workspace flag names (accepted,
// not used). pair prints the certificate's SHA-256 and its public key's
// SPKI hash, the values gateway.json holds.
func TestDeviceCommandsAnyWorkspace(t *testing.T) {
	dir := t.TempDir()
	home, ws, other := filepath.Join(dir, "home"), filepath.Join(dir, "ws"), filepath.Join(dir, "other")
	for _, d := range []string{ws, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	app := startAtrium(t, "serve", "--home", home, "--workspace", ws, "--port", freePort(t), "--bind", "127.0.0.2")
	app.running(t)
	info, err := atrium.ReadGatewayInfo(filepath.Join(home, "gateway.json"))
	if err != nil || info.TLSSPKI == "" || info.TLSFingerprint == "" {
		t.Fatalf("gateway.json: %+v %v", info, err)
	}
	for _, env := range []map[string]string{nil, {"ATRIUM_WORKSPACE": other}} {
		for _, extra := range [][]string{nil, {"--workspace", other}} {
			code, out, errOut := runCLI(t, env, append([]string{"pair", "--home", home}, extra...)...)
			if code != 0 {
				t.Fatalf("pair (env %v, %v): exit %d\n%s\n%s", env, extra, code, out, errOut)
			}
			for _, want := range []string{"Setup code: ", "Certificate SHA-256: " + info.TLSFingerprint,
				"Public key (SPKI SHA-256, base64): " + info.TLSSPKI, "--ignore-certificate-errors-spki-list=" + info.TLSSPKI} {
				if !strings.Contains(out, want) {
					t.Errorf("pair output lacks %q:\n%s", want, out)
				}
			}
			code, out, errOut = runCLI(t, env, append([]string{"nodes", "list", "--home", home}, extra...)...)
			if code != 0 || !strings.Contains(out, "No paired devices") {
				t.Fatalf("nodes list (env %v, %v): exit %d\n%s\n%s", env, extra, code, out, errOut)
			}
		}
	}
	code, out, errOut := runCLI(t, nil, "pair", "--home", home, "--json")
	var pc pairCode
	if code != 0 || json.Unmarshal([]byte(out), &pc) != nil || pc.SPKI != info.TLSSPKI || pc.Fingerprint != info.TLSFingerprint {
		t.Fatalf("pair --json: exit %d %+v\n%s\n%s", code, pc, out, errOut)
	}
	// Another state dir has no app: the error names the state dir.
	code, _, errOut = runCLI(t, nil, "nodes", "pending", "--home", filepath.Join(dir, "none"))
	if code != 1 || !strings.Contains(errOut, "needs the running app of "+filepath.Join(dir, "none")) {
		t.Fatalf("nodes pending without an app: exit %d %s", code, errOut)
	}
}
