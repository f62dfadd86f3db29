package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// TestPhoneSnapOverHTTPSFallback (issue 22 item 2): the phone Chromium is
// started without --allow-loopback-in-peer-connection, so its WebRTC has
// no path to the gateway on 127.0.0.2 (no loopback candidates; the
// gateway offers loopback ones only): the data channel cannot be set up.
// camera.snap still lands: the page falls back to the HTTPS upload over
// its own origin with its device token, and node.invoke's media says
// transport "https"; the stored JPEG's SHA-256 is the page's and it
// decodes 320 wide.
func TestPhoneSnapOverHTTPSFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	g := startMediaGateway(t, tmp)
	phone, deviceID := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"camera.snap"}, []string{"camera"},
		chromedp.UserAgent(phoneUA), chromedp.WindowSize(412, 915),
		chromedp.Flag("allow-loopback-in-peer-connection", false))

	res := g.invokeMedia(t, deviceID, "camera.snap", map[string]any{"maxWidth": 320, "quality": 0.8}, 90000)
	if !res.OK || res.Media == nil {
		t.Fatalf("camera.snap with the data channel blocked: %+v", res)
	}
	m := res.Media
	if m.Transport != "https" {
		t.Fatalf("the photo came over %q, want the HTTPS fallback", m.Transport)
	}
	waitFor(t, phone, "the phone to show the photo it sent", `!!document.querySelector('[data-testid=phone-last-photo]')`, 10*time.Second)
	pageSum := js[string](t, phone, `document.querySelector('[data-testid=phone-last-photo]').dataset.sha256`)
	data, err := os.ReadFile(filepath.Join(g.home, "media", m.File))
	if err != nil {
		t.Fatalf("the photo in $ATRIUM_HOME/media: %v", err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != pageSum || m.SHA256 != pageSum || m.Size != int64(len(data)) {
		t.Fatalf("the stored photo's SHA-256 %s, the page's %s, the sidecar's %s", got, pageSum, m.SHA256)
	}
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil || img.Bounds().Dx() != 320 || m.Width != 320 {
		t.Fatalf("the stored photo: %v (%v), sidecar %d×%d, want 320 wide", err, img, m.Width, m.Height)
	}
	var side struct{ Transport string }
	if b, err := os.ReadFile(filepath.Join(g.home, "media", m.ID+".json")); err != nil || json.Unmarshal(b, &side) != nil || side.Transport != "https" {
		t.Fatalf("the sidecar says transport %q (%v)", side.Transport, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(g.home, "media", ".partial")); len(ents) != 0 {
		t.Errorf("%d partial transfers left", len(ents))
	}
	t.Logf("photo %s over https: %d bytes, %d×%d", m.ID, m.Size, m.Width, m.Height)
}
