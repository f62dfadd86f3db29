// Package netnstest runs a test inside a network namespace of its own, so
// that its mDNS traffic never reaches the machine's interfaces (tests send
// traffic only to 127.0.0.0/8 or inside such a namespace). It is imported
// by tests only.
//
//	func TestX(t *testing.T) {
//		if !netnstest.Run(t) {
//			return // the parent: Run re-executed TestX in a namespace and reported it
//		}
//		netnstest.MulticastOnLo(t)
//		… // runs in the namespace: lo is up and carries multicast
//	}
package netnstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Env marks a test binary re-executed inside its own network namespace.
const Env = "ATRIUM_NETNS_TEST"

// Run runs the calling top-level test again in a new network namespace
// (unshare -n, as root; its loopback is set up) and fails t when that run
// fails. It returns true in the re-executed test (the body runs there) and
// false in the parent. The test is skipped with a clear message when
// unshare -n or ip (iproute2) cannot be used. The child's output is logged.
func Run(t *testing.T) bool {
	t.Helper()
	if os.Getenv(Env) == "1" {
		cmd(t, "ip", "link", "set", "lo", "up")
		return true
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("this test needs ip (Debian iproute2) to set up a network namespace's loopback")
	}
	if out, err := exec.Command("unshare", "-n", "true").CombinedOutput(); err != nil {
		t.Skipf("this test runs in a network namespace of its own and needs unshare -n (util-linux, root): %v %s", err, strings.TrimSpace(string(out)))
	}
	c := exec.Command("unshare", "-n", "--", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=5m")
	c.Env = append(os.Environ(), Env+"=1")
	out, err := c.CombinedOutput()
	t.Logf("in a new network namespace:\n%s", out)
	if err != nil {
		t.Fatalf("test in the namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("test in the namespace did not pass")
	}
	return false
}

// MulticastOnLo turns multicast on for the namespace's loopback and routes
// 224.0.0.0/4 there (BUILD-NOTES, "mDNS"). Call it only inside Run's
// namespace.
func MulticastOnLo(t testing.TB) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Fatal("netnstest.MulticastOnLo outside a test namespace: it would change this machine's loopback")
	}
	cmd(t, "ip", "link", "set", "lo", "multicast", "on")
	cmd(t, "ip", "route", "add", "224.0.0.0/4", "dev", "lo")
}

// Veth adds a veth pair a–b inside Run's namespace, a link of its own
// (what one end sends, the other receives), both ends up and multicast,
// with IPv6 duplicate address detection off so that an address added to
// either end is usable at once (IPv6 multicast does not work on a
// namespace's lo). It skips the test when the kernel offers no veth.
func Veth(t testing.TB, a, b string) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Fatal("netnstest.Veth outside a test namespace")
	}
	for _, f := range []string{"/proc/sys/net/ipv6/conf/default/accept_dad", "/proc/sys/net/ipv6/conf/all/accept_dad"} {
		if err := os.WriteFile(f, []byte("0"), 0o644); err != nil {
			t.Skipf("this test needs IPv6 in its network namespace: %v", err)
		}
	}
	if out, err := exec.Command("ip", "link", "add", a, "type", "veth", "peer", "name", b).CombinedOutput(); err != nil {
		t.Skipf("this test needs a veth pair in its network namespace (kernel veth support): %v %s", err, strings.TrimSpace(string(out)))
	}
	cmd(t, "ip", "link", "set", a, "up")
	cmd(t, "ip", "link", "set", b, "up")
}

// Addr adds addr ("fe80::a/64", "fd00::a/64", "10.9.0.1/24") to the
// interface dev inside Run's namespace, usable at once (IPv6: nodad).
func Addr(t testing.TB, dev, addr string) {
	t.Helper()
	args := []string{"addr", "add", addr, "dev", dev}
	if strings.Contains(addr, ":") {
		args = append([]string{"-6"}, append(args, "nodad")...)
	}
	cmd(t, "ip", args...)
}

func cmd(t testing.TB, name string, args ...string) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Fatalf("%s %s outside a test namespace", name, strings.Join(args, " "))
	}
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v %s", name, strings.Join(args, " "), err, out)
	}
}
