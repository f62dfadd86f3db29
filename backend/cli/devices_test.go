package cli

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/device/devicetest"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// zbar decodes the QR code in the PNG file with zbarimg.
func zbar(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("zbarimg", "-q", "--raw", "--nodbus", file).Output()
	if err != nil {
		t.Fatalf("zbarimg %s: %v", file, err)
	}
	return strings.TrimSpace(string(out))
}

// terminalQRToPNG turns the half-block QR printed for a dark background
// back into a PNG (4 px per module), so zbarimg can read what a person's
// phone would read off the terminal.
func terminalQRToPNG(t *testing.T, out, file string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.ContainsAny(l, "█▀▄") {
			lines = append(lines, l)
		} else if len(lines) > 0 {
			break
		}
	}
	if len(lines) < 10 {
		t.Fatalf("no QR code in the output:\n%s", out)
	}
	w := len([]rune(lines[0]))
	const px = 4
	img := image.NewGray(image.Rect(0, 0, (w+8)*px, (2*len(lines)+8)*px))
	// The terminal's background is dark (0); a block is a light module.
	set := func(x, y int, light bool) {
		c := color.Gray{0}
		if light {
			c = color.Gray{255}
		}
		for dy := range px {
			for dx := range px {
				img.SetGray((x+4)*px+dx, (y+4)*px+dy, c)
			}
		}
	}
	for row, l := range lines {
		for x, r := range []rune(l) {
			set(x, 2*row, r == '█' || r == '▀')
			set(x, 2*row+1, r == '█' || r == '▄')
		}
	}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

// TestPairAndNodesCommands: `atrium pair` prints a QR code (read back by
// zbarimg from the terminal text and from --png) holding the pairing URL;
// a device pairs with its setup code, is listed by `atrium nodes pending`
// and approved by `atrium nodes approve`; then list, rotate, revoke and
// remove act on it.
func TestPairAndNodesCommands(t *testing.T) {
	if _, err := exec.LookPath("zbarimg"); err != nil {
		t.Skip("zbarimg not installed (apt zbar-tools; make deps installs it)")
	}
	home, ws := workspace(t)
	port := serveApp(t, home, ws)
	common := []string{"--home", home, "--workspace", ws, "--port", port}
	dir := t.TempDir()
	pngFile := filepath.Join(dir, "qr.png")
	code, out, errOut := runCLI(t, nil, append([]string{"pair", "--png", pngFile}, common...)...)
	if code != 0 {
		t.Fatalf("pair: exit %d\n%s\n%s", code, out, errOut)
	}
	m := regexp.MustCompile(`Open on the device: (\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "Setup code: ") || !strings.Contains(out, "Note: ") || !strings.Contains(out, "locked after 10 wrong codes") {
		t.Fatalf("pair output:\n%s", out)
	}
	pairURL := m[1]
	if got := zbar(t, pngFile); got != pairURL {
		t.Fatalf("--png QR holds %q, want %q", got, pairURL)
	}
	termFile := filepath.Join(dir, "term.png")
	terminalQRToPNG(t, out, termFile)
	if got := zbar(t, termFile); got != pairURL {
		t.Fatalf("terminal QR holds %q, want %q", got, pairURL)
	}
	u, err := url.Parse(pairURL)
	if err != nil || u.Host != "127.0.0.1:"+port || u.Path != "/pair" {
		t.Fatalf("pair URL %q: %v", pairURL, err)
	}
	frag, err := url.ParseQuery(u.Fragment)
	if err != nil || frag.Get("c") == "" || len(frag.Get("g")) != 64 {
		t.Fatalf("pair URL fragment %q: %v", u.Fragment, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := devicetest.NewKey(t, device.Ed25519)
	dial := func(o gateway.ClientOptions) (*gateway.Client, error) {
		o.URL, o.GatewayID, o.Role = "ws://127.0.0.1:"+port+"/ws", frag.Get("g"), gateway.RoleNode
		o.Client = devicetest.NodeHost()
		o.Commands = []string{"system.run", "system.which"}
		return devicetest.Dial(ctx, t, key, o)
	}
	pending, err := dial(gateway.ClientOptions{SetupCode: frag.Get("c")})
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Close()
	reqID := pending.Auth().RequestID
	code, out, errOut = runCLI(t, nil, append([]string{"nodes", "pending"}, common...)...)
	if code != 0 || !strings.Contains(out, reqID) || !strings.Contains(out, "build box") || !strings.Contains(out, "system.run,system.which") {
		t.Fatalf("nodes pending: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil, append([]string{"nodes", "approve"}, common...)...); code != 2 || !strings.Contains(errOut, "nodes approve") {
		t.Fatalf("nodes approve without an id: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, nil, append([]string{"nodes", "approve", reqID, "--commands", "rm"}, common...)...); code != 1 || !strings.Contains(errOut, "not requested") {
		t.Fatalf("approving a command not declared: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, nil, append([]string{"nodes", "approve", reqID, "--scope", "role:nosuch"}, common...)...); code != 1 || !strings.Contains(errOut, `unknown role "nosuch"`) {
		t.Fatalf("approving a scope of an unknown role: exit %d %s", code, errOut)
	}
	code, out, errOut = runCLI(t, nil, append([]string{"nodes", "approve", reqID, "--commands", "system.which"}, common...)...)
	if code != 0 || !strings.Contains(out, "Approved build box") || !strings.Contains(out, "memory scope authenticated") {
		t.Fatalf("nodes approve: exit %d\n%s\n%s", code, out, errOut)
	}
	var tok string
	for tok == "" {
		select {
		case ev := <-pending.Events():
			if ev.Event == "device.pair.resolved" {
				tok = regexp.MustCompile(`"node":"([^"]+)"`).FindStringSubmatch(string(ev.Payload))[1]
			}
		case <-ctx.Done():
			t.Fatal("no device.pair.resolved")
		}
	}
	pending.Close()
	<-pending.Done()
	node, err := dial(gateway.ClientOptions{DeviceToken: tok})
	if err != nil {
		t.Fatal(err)
	}
	dev := key.Public().ID()
	code, out, _ = runCLI(t, nil, append([]string{"nodes", "list"}, common...)...)
	if code != 0 || !strings.Contains(out, dev) || !strings.Contains(out, "true") || !strings.Contains(out, "system.which") ||
		!strings.Contains(out, "SCOPE") || !strings.Contains(out, "authenticated") {
		t.Fatalf("nodes list:\n%s", out)
	}
	code, out, errOut = runCLI(t, nil, append([]string{"nodes", "scope", dev, "role:main"}, common...)...)
	if code != 0 || !strings.Contains(out, "now has memory scope role:main") {
		t.Fatalf("nodes scope: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil, append([]string{"nodes", "scope", dev, "everything"}, common...)...); code != 1 || !strings.Contains(errOut, "bad device scope") {
		t.Fatalf("nodes scope everything: exit %d %s", code, errOut)
	}
	if code, out, _ := runCLI(t, nil, append([]string{"nodes", "list"}, common...)...); code != 0 || !strings.Contains(out, "role:main") {
		t.Fatalf("nodes list after nodes scope:\n%s", out)
	}
	code, out, errOut = runCLI(t, nil, append([]string{"nodes", "rotate", dev, "--role", "node"}, common...)...)
	if code != 0 || !strings.Contains(out, "sent to 1 live") {
		t.Fatalf("nodes rotate: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, nil, append([]string{"nodes", "revoke", dev}, common...)...)
	if code != 0 || !strings.Contains(out, "1 connection(s) closed") {
		t.Fatalf("nodes revoke: exit %d\n%s\n%s", code, out, errOut)
	}
	<-node.Done()
	code, out, errOut = runCLI(t, nil, append([]string{"nodes", "remove", dev}, common...)...)
	if code != 0 || !strings.Contains(out, "Removed") {
		t.Fatalf("nodes remove: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, nil, append([]string{"nodes", "list"}, common...)...); code != 0 || !strings.Contains(out, "No paired devices") {
		t.Fatalf("nodes list after remove:\n%s", out)
	}
}
