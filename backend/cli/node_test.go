package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeFlags: `atrium node` refuses contradictory or unusable pairing
// input with a usage error before touching the network, and creates its
// state dir (key, default exec approvals) where ATRIUM_NODE_HOME says.
func TestNodeFlags(t *testing.T) {
	id, fp := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	url := "https://127.0.0.2:1/pair#c=ABCD-EFGH&g=" + id + "&f=" + fp
	state := filepath.Join(t.TempDir(), "node")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--gateway", "https://127.0.0.2:1", "--url", url}, "not both"},
		{[]string{"node", "--url", url, "--fingerprint", strings.Repeat("ef", 32)}, "--fingerprint differs"},
		{[]string{"node", "--url", url, "--gateway-id", strings.Repeat("01", 32)}, "--gateway-id differs"},
		{[]string{"node", "--url", "http://192.0.2.9:1/pair#c=X"}, "loopback only"},
		{[]string{"node", "--fingerprint", "xyz"}, "bad certificate fingerprint"},
		{[]string{"node", "extra"}, "no arguments"},
	} {
		code, _, stderr := runCLI(t, map[string]string{"ATRIUM_NODE_HOME": state}, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(state); err == nil {
		t.Fatal("a usage error created the state dir")
	}
	// Nothing to connect to: a clear error, and the state dir is ready.
	code, _, stderr := runCLI(t, map[string]string{"ATRIUM_NODE_HOME": state}, "node")
	if code != 1 || !strings.Contains(stderr, "no gateway to connect to") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, name := range []string{"device.key", "exec-approvals.json"} {
		st, err := os.Stat(filepath.Join(state, name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", name, st, err)
		}
	}
}
