package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// mediaGateway is a running app bound to 127.0.0.2 (the phone's "LAN")
// and its admin session.
type mediaGateway struct {
	bin     string // the atrium binary
	port    int
	home    string
	uiURL   string // the loopback UI URL with the operator token
	admin   *adminSession
	spkiPin string
}

// startMediaGateway starts the app under tmp, bound to 127.0.0.2.
func startMediaGateway(t *testing.T, tmp string) *mediaGateway {
	t.Helper()
	return startMediaGatewayWith(t, tmp, nil)
}

// startMediaGatewayWith is startMediaGateway after prepare (when not nil)
// got $ATRIUM_HOME to fill (a config.json).
func startMediaGatewayWith(t *testing.T, tmp string, prepare func(home string)) *mediaGateway {
	t.Helper()
	bin := buildAtrium(t)
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "workspace")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		prepare(home)
	}
	port := freePort(t)
	uiURL, _ := serve(t, bin, home, ws, port, nil, "--bind", "127.0.0.2")
	g := &mediaGateway{bin: bin, port: port, home: home, uiURL: uiURL, admin: newAdminSession(t, uiURL)}
	cert, err := gwid.LoadCert(gwid.Options{Dir: filepath.Join(home, "keys")})
	if err != nil {
		t.Fatalf("the gateway's certificate: %v", err)
	}
	g.spkiPin = cert.SPKIBase64()
	return g
}

// pairBrowser opens the pairing page in a new Chromium (fake camera,
// microphone and screen, the gateway's SPKI pin, loopback WebRTC), checks
// that its pairing request declares wantCommands and wantCaps, approves
// everything it asks for and waits until its node is connected. It returns
// the browser and the device's id.
func (g *mediaGateway) pairBrowser(t *testing.T, chromium, dir string, wantCommands, wantCaps []string, extra ...chromedp.ExecAllocatorOption) (context.Context, string) {
	t.Helper()
	var code struct{ URL string }
	if err := json.Unmarshal(g.admin.call("device.pair.code", nil), &code); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, chromium, dir, append([]chromedp.ExecAllocatorOption{
		chromedp.Flag("ignore-certificate-errors-spki-list", g.spkiPin),
		// Fake camera and microphone, and a fake screen for getDisplayMedia
		// (both flags are needed for the screen: the fake UI alone gives
		// NotReadableError in headless Chromium).
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("allow-loopback-in-peer-connection", true),
	}, extra...)...)
	if err := chromedp.Do(b, chromedp.Navigate(code.URL)); err != nil {
		t.Fatalf("the browser opens %s: %v", code.URL, err)
	}
	waitFor(t, b, "the browser to wait for approval", `!!document.querySelector('[data-testid=phone-pending]')`, 30*time.Second)
	deviceID := js[string](t, b, `document.querySelector('[data-testid=phone-device]').dataset.device`)
	type request struct {
		RequestID, DeviceID string
		Commands, Caps      []string
	}
	var reqs struct {
		Pending []request
	}
	if err := json.Unmarshal(g.admin.call("device.pair.list", nil), &reqs); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(reqs.Pending, func(r request) bool { return r.DeviceID == deviceID })
	if i < 0 {
		t.Fatalf("no pairing request of %s in %+v", deviceID, reqs)
	}
	r := reqs.Pending[i]
	for _, c := range wantCommands {
		if !slices.Contains(r.Commands, c) {
			t.Fatalf("the pairing request's commands %v lack %s", r.Commands, c)
		}
	}
	for _, c := range wantCaps {
		if !slices.Contains(r.Caps, c) {
			t.Fatalf("the pairing request's caps %v lack %s", r.Caps, c)
		}
	}
	g.admin.call("device.pair.approve", map[string]any{"requestId": r.RequestID})
	waitFor(t, b, "the browser paired, its node connected", `document.querySelector('[data-testid=phone-node-state]')?.dataset.state === 'connected'`, 30*time.Second)
	g.admin.waitConnected(deviceID)
	return b, deviceID
}

// mediaResult is node.invoke's answer to a media command (camera.snap,
// camera.clip, screen.*).
type mediaResult struct {
	OK      bool `json:"ok"`
	Payload struct {
		Width, Height int
		SHA256        string `json:"sha256"`
		MIME          string `json:"mime"`
		DurationMs    int64
		Resumed       bool // the node's page was killed mid-transfer and the file came from the page opened again
	} `json:"payload"`
	Error *struct{ Code, Message string } `json:"error"`
	Media *struct {
		ID, File, Path, MIME, Transport, Command, Device string
		SHA256                                           string `json:"sha256"`
		SourceSHA256                                     string `json:"sourceSha256"`
		Size, SourceSize                                 int64
		Width, Height                                    int
		DurationMs                                       int64
	} `json:"media"`
}

// invokeMedia runs a media command on node as the admin.
func (g *mediaGateway) invokeMedia(t *testing.T, node, command string, params map[string]any, timeoutMs int) mediaResult {
	t.Helper()
	raw := g.admin.call("node.invoke", map[string]any{"nodeId": node, "command": command, "params": params, "timeoutMs": timeoutMs})
	var res mediaResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%s's answer %s: %v", command, raw, err)
	}
	return res
}

// TestPhoneCameraSnap (issue 22): a phone Chromium with a fake camera,
// paired over TLS with the SPKI pin, declares camera.list and camera.snap
// (the pairing request lists them); the admin invokes camera.snap with
// maxWidth 320, the page takes the photo (getUserMedia, canvas, JPEG) and
// sends it over a WebRTC data channel; a JPEG lands in $ATRIUM_HOME/media
// whose SHA-256 is the one the page computed and which decodes to 320
// pixels wide. A page in the background (frozen then resumed: hidden)
// answers NODE_BACKGROUND_UNAVAILABLE instead of hanging. (A denied camera
// is tested in camera.test.ts: --use-fake-ui-for-media-stream grants the
// camera whatever Browser.setPermission says.)
func TestPhoneCameraSnap(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	g := startMediaGateway(t, tmp)
	phone, deviceID := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"camera.snap", "camera.list"}, []string{"camera"},
		chromedp.UserAgent(phoneUA), chromedp.WindowSize(412, 915))
	admin, home, bin, port := g.admin, g.home, g.bin, g.port

	snap := func() mediaResult {
		t.Helper()
		return g.invokeMedia(t, deviceID, "camera.snap", map[string]any{"maxWidth": 320, "quality": 0.8}, 60000)
	}
	res := snap()
	if !res.OK || res.Media == nil {
		t.Fatalf("camera.snap: %+v", res)
	}
	waitFor(t, phone, "the phone to show the photo it sent", `!!document.querySelector('[data-testid=phone-last-photo]')`, 10*time.Second)
	pageSum := js[string](t, phone, `document.querySelector('[data-testid=phone-last-photo]').dataset.sha256`)
	m := res.Media
	if want := filepath.Join(home, "media", m.ID+".jpg"); m.Path != want || m.File != m.ID+".jpg" {
		t.Errorf("media path %q file %q, want %q", m.Path, m.File, want)
	}
	data, err := os.ReadFile(filepath.Join(home, "media", m.File))
	if err != nil {
		t.Fatalf("the photo in $ATRIUM_HOME/media: %v", err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != pageSum || m.SHA256 != pageSum || res.Payload.SHA256 != pageSum || m.Size != int64(len(data)) {
		t.Fatalf("the stored photo's SHA-256 %s, the page's %s, the sidecar's %s (%d bytes, %d on disk)", got, pageSum, m.SHA256, m.Size, len(data))
	}
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the stored photo does not decode as JPEG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 320 || m.Width != 320 || m.Height != b.Dy() || res.Payload.Width != 320 {
		t.Fatalf("the photo is %v, the sidecar says %d×%d, want 320 wide", b, m.Width, m.Height)
	}
	if m.MIME != "image/jpeg" || m.Transport != "webrtc" || m.Command != "camera.snap" || m.Device != deviceID {
		t.Errorf("the sidecar %+v", m)
	}
	if _, err := os.Stat(filepath.Join(home, "media", m.ID+".json")); err != nil {
		t.Errorf("no sidecar beside the photo: %v", err)
	}

	// The CLI (issue 22 item 5): one photo per camera by default, each
	// shown with its path, size, dimensions and SHA-256.
	out := runBin(t, bin, "nodes", "camera", "snap", "--node", deviceID, "--max-width", "320", "--home", home, "--port", fmt.Sprint(port))
	cliPhotos := regexp.MustCompile(`(?m)^(front|back): (\S+)\n  (\d+) bytes, 320×\d+, image/jpeg, sha256 ([0-9a-f]{64})$`).FindAllStringSubmatch(out, -1)
	if len(cliPhotos) != 2 || cliPhotos[0][1] != "front" || cliPhotos[1][1] != "back" {
		t.Fatalf("atrium nodes camera snap printed:\n%s", out)
	}
	var cliNames []string
	for _, p := range cliPhotos {
		data, err := os.ReadFile(p[2])
		sum := sha256.Sum256(data)
		if err != nil || filepath.Dir(p[2]) != filepath.Join(home, "media") || fmt.Sprint(len(data)) != p[3] || hex.EncodeToString(sum[:]) != p[4] {
			t.Fatalf("the CLI's %s photo %s: %d bytes (%v), printed %q", p[1], p[2], len(data), err, p[0])
		}
		if img, err := jpeg.Decode(bytes.NewReader(data)); err != nil || img.Bounds().Dx() != 320 {
			t.Fatalf("the CLI's %s photo does not decode to 320 wide: %v", p[1], err)
		}
		id := strings.TrimSuffix(filepath.Base(p[2]), ".jpg")
		cliNames = append(cliNames, id+".jpg", id+".json")
	}

	// The page goes to the background: freezing it makes it hidden, and
	// resumed it runs hidden, like a phone's tab behind another app.
	for _, st := range []page.SetWebLifecycleStateState{page.SetWebLifecycleStateStateFrozen, page.SetWebLifecycleStateStateActive} {
		if _, err := chromedp.Call(phone, page.SetWebLifecycleState, page.SetWebLifecycleStateParams{State: st}); err != nil {
			t.Fatalf("page lifecycle %s: %v", st, err)
		}
	}
	if !js[bool](t, phone, `document.hidden`) {
		t.Fatal("the phone page is not hidden: the background case cannot be tested this way")
	}
	waitFor(t, phone, "the node connection after the freeze", `document.querySelector('[data-testid=phone-node-state]')?.dataset.state === 'connected'`, 30*time.Second)
	admin.waitConnected(deviceID)
	res = snap()
	if res.OK || res.Error == nil || res.Error.Code != "NODE_BACKGROUND_UNAVAILABLE" {
		t.Fatalf("camera.snap on a hidden page: %+v, want NODE_BACKGROUND_UNAVAILABLE", res)
	}
	waitFor(t, phone, "the phone to say why", `document.querySelector('[data-testid=phone-invoke-hint]')?.textContent.includes('background')`, 10*time.Second)
	entries, err := os.ReadDir(filepath.Join(home, "media"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := append([]string{".partial", m.ID + ".jpg", m.ID + ".json"}, cliNames...)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("$ATRIUM_HOME/media holds %v, want %v", names, want)
	}
	t.Logf("photo %s: %d bytes, %d×%d", m.ID, m.Size, m.Width, m.Height)
}
