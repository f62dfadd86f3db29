package discovery

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// envNetns marks the test binary re-executed inside its own network
// namespace by inNetns.
const envNetns = "ATRIUM_DISCOVERY_NETNS"

// inNetns runs the calling top-level test again in a network namespace of
// its own (unshare -n, as root) and reports its result. It returns true in
// that child (the test body runs there) and false in the parent. mDNS
// traffic thus never reaches the machine's interfaces. The test is skipped
// with a clear message when unshare -n or ip cannot be used.
func inNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(envNetns) == "1" {
		run(t, "ip", "link", "set", "lo", "up")
		return true
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("mDNS tests need ip (Debian iproute2) to set up multicast on a namespace's loopback")
	}
	if out, err := exec.Command("unshare", "-n", "true").CombinedOutput(); err != nil {
		t.Skipf("mDNS tests run in a network namespace of their own and need unshare -n (util-linux, root): %v %s", err, strings.TrimSpace(string(out)))
	}
	cmd := exec.Command("unshare", "-n", "--", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), envNetns+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a new network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("test in the namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("test in the namespace did not pass")
	}
	return false
}

// multicastOnLo turns multicast on for the namespace's loopback and routes
// the multicast range there (BUILD-NOTES, "mDNS").
func multicastOnLo(t *testing.T) {
	t.Helper()
	run(t, "ip", "link", "set", "lo", "multicast", "on")
	run(t, "ip", "route", "add", "224.0.0.0/4", "dev", "lo")
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v %s", name, strings.Join(args, " "), err, out)
	}
}
