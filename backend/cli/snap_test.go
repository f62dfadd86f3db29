package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/device/devicetest"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// jpegOf is a w×h JPEG.
func jpegOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 4), 0x80, 0xff})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pairCameraNode pairs a device as a node named name that declares
// camera.snap (approved with `atrium nodes approve`) and serves it the way
// the phone page does: the photo of the asked facing (front 32×24, back
// 64×48) over a pion data channel for the gateway's transfer, the result
// naming it; quality 0.5 makes the front camera fail FORBIDDEN (denied).
// A failCode answers every command with that error instead (a node that
// declares a camera and a screen but has neither).
func pairCameraNode(ctx context.Context, t *testing.T, a *nodeApp, name, failCode string) (string, map[string][]byte) {
	t.Helper()
	u, err := url.Parse(a.pairURL(t))
	if err != nil {
		t.Fatal(err)
	}
	frag, err := url.ParseQuery(u.Fragment)
	if err != nil {
		t.Fatal(err)
	}
	key := devicetest.NewKey(t, device.Ed25519)
	dial := func(o gateway.ClientOptions) *gateway.Client {
		o.URL, o.GatewayID, o.Role = "ws://127.0.0.1:"+a.port+"/ws", frag.Get("g"), gateway.RoleNode
		o.Client = devicetest.Phone()
		o.Client.DisplayName = name
		o.Caps, o.Commands = []string{"camera", "screen"}, []string{"camera.clip", "camera.snap", "screen.record", "screen.snapshot"}
		c, err := devicetest.Dial(ctx, t, key, o)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pending := dial(gateway.ClientOptions{SetupCode: frag.Get("c")})
	if code, out, errOut := a.cli(t, "nodes", "approve", pending.Auth().RequestID); code != 0 {
		t.Fatalf("nodes approve: exit %d\n%s\n%s", code, out, errOut)
	}
	tok := ""
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
	node := dial(gateway.ClientOptions{DeviceToken: tok})
	photos := map[string][]byte{"front": jpegOf(t, 32, 24), "back": jpegOf(t, 64, 48), "screen": jpegOf(t, 40, 30)}
	shot := photos["screen"]
	go func() {
		for ev := range node.Events() {
			var r nodes.InvokeRequestEvent
			if ev.Event != nodes.EventInvokeRequest || json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			var p struct {
				Facing       string
				Quality      float64
				DurationMs   int64
				IncludeAudio *bool
				Fps          int
				Screen       *int
				Format       string
				Transfer     struct{ ID string }
			}
			_ = json.Unmarshal(r.Params, &p)
			go func() {
				if failCode != "" {
					_ = node.Call(ctx, nodes.MethodInvokeResult, map[string]any{"id": r.ID, "ok": false,
						"error": map[string]string{"code": failCode, "message": "nothing to capture on " + name}}, nil)
					return
				}
				photo, mime, name := photos[p.Facing], "image/jpeg", "photo.jpg"
				switch r.Command {
				case "screen.record":
					photo, mime, name = []byte(fmt.Sprintf("screen %d ms %d fps", p.DurationMs, p.Fps)), "video/webm", "screen.webm"
					if p.Screen != nil {
						photo = fmt.Appendf(photo, " screen %d", *p.Screen)
					}
				case "screen.snapshot":
					// Only screen 1 of this node, as JPEG.
					if p.Screen == nil || *p.Screen != 1 || p.Format != "jpeg" {
						_ = node.Call(ctx, nodes.MethodInvokeResult, map[string]any{"id": r.ID, "ok": false,
							"error": map[string]string{"code": "NO_SCREEN", "message": fmt.Sprintf("no screen %d as %s", *cmp.Or(p.Screen, new(int)), p.Format)}}, nil)
						return
					}
					photo, mime, name = shot, "image/jpeg", "screen.jpg"
				case "camera.clip":
					// A stand-in for a recording: its bytes say what was asked.
					photo, mime, name = []byte(fmt.Sprintf("clip %s %d ms audio %v", p.Facing, p.DurationMs, p.IncludeAudio != nil && *p.IncludeAudio)), "video/webm", "clip.webm"
				}
				if p.Facing == "front" && p.Quality == 0.5 || photo == nil {
					_ = node.Call(ctx, nodes.MethodInvokeResult, map[string]any{"id": r.ID, "ok": false,
						"error": map[string]string{"code": "FORBIDDEN", "message": "the camera was denied"}}, nil)
					return
				}
				var snd rtc.Sender
				_, err := snd.Send(ctx, rtc.File{ID: p.Transfer.ID, Name: name, Data: bytes.NewReader(photo), Size: int64(len(photo)), MIME: mime,
					DurationMs: p.DurationMs},
					func(ctx context.Context, sdp string) (string, error) {
						var a struct{ SDP string }
						err := node.Call(ctx, nodes.MethodMediaOffer, map[string]any{"transferId": p.Transfer.ID, "sdp": sdp}, &a)
						return a.SDP, err
					})
				res := map[string]any{"id": r.ID, "ok": err == nil, "payload": map[string]any{"facing": p.Facing},
					"media": map[string]any{"id": p.Transfer.ID, "transport": "webrtc"}}
				if err != nil {
					res["error"] = map[string]string{"code": "INTERNAL", "message": err.Error()}
				}
				_ = node.Call(ctx, nodes.MethodInvokeResult, res, nil)
			}()
		}
	}()
	return key.Public().ID(), photos
}

// TestNodesCameraSnap (issue 22 item 5): `atrium nodes camera snap`, `camera clip` and `screen record` against
// the real app and a node that sends its photos over a WebRTC data channel
// (pion): --facing both (the default) takes one photo per camera, each
// stored in $ATRIUM_HOME/media and shown with its path, size, dimensions
// and SHA-256 (checked against the file), --out copies them; a camera that
// fails is reported (exit 1) after the other's photo; bad flags are usage
// errors.
func TestNodesCameraSnap(t *testing.T) {
	a := startNodeApp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dev, photos := pairCameraNode(ctx, t, a, "my-iphone", "")
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	outDir := t.TempDir()

	code, out, errOut := cliProc(t, append(append([]string{}, a.flags...), "nodes", "camera", "snap", "--node", "my-iphone", "--out", outDir)...)
	if code != 0 {
		t.Fatalf("nodes camera snap: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("nodes camera snap:\n%s", out)
	re := regexp.MustCompile(`(?m)^(front|back): (\S+)\n  (\d+) bytes, (\d+)×(\d+), image/jpeg, sha256 ([0-9a-f]{64})\n  copied to (\S+)$`)
	ms := re.FindAllStringSubmatch(out, -1)
	if len(ms) != 2 || ms[0][1] != "front" || ms[1][1] != "back" {
		t.Fatalf("nodes camera snap printed:\n%s", out)
	}
	for _, m := range ms {
		photo, dims := photos[m[1]], map[string]string{"front": "32×24", "back": "64×48"}[m[1]]
		if filepath.Dir(m[2]) != filepath.Join(a.home, "media") || m[3] != itoa(len(photo)) || m[4]+"×"+m[5] != dims || m[6] != sum(photo) {
			t.Errorf("%s: %q, want %d bytes, %s, sha256 %s in %s/media", m[1], m[0], len(photo), dims, sum(photo), a.home)
		}
		for _, f := range []string{m[2], m[7]} {
			if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, photo) {
				t.Errorf("%s: %s holds %d bytes (%v), want the %s photo", m[1], f, len(b), err, m[1])
			}
		}
		if filepath.Dir(m[7]) != outDir {
			t.Errorf("copied to %s, want into %s", m[7], outDir)
		}
	}

	// The front camera denied: the back photo is still taken and shown.
	code, out, errOut = a.cli(t, "nodes", "camera", "snap", "--node", dev, "--quality", "0.5", "--json")
	var js struct {
		Photos []struct {
			Facing string
			Media  nodes.Media
		}
	}
	if code != 1 || json.Unmarshal([]byte(out), &js) != nil || len(js.Photos) != 1 || js.Photos[0].Facing != "back" ||
		js.Photos[0].Media.SHA256 != sum(photos["back"]) || !strings.Contains(errOut, "front camera: node my-iphone: camera.snap FORBIDDEN: the camera was denied") {
		t.Fatalf("a denied front camera: exit %d\n%s\n%s", code, out, errOut)
	}
	// A clip: its length and sound as asked, shown like a photo.
	code, out, errOut = a.cli(t, "nodes", "camera", "clip", "--node", "my-iphone", "--duration", "2s", "--no-audio")
	m := regexp.MustCompile(`^back: (\S+)\n  (\d+) bytes, 2\.0 s, video/webm, sha256 ([0-9a-f]{64})\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("nodes camera clip: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(m[1]); err != nil || string(b) != "clip back 2000 ms audio false" || m[3] != sum(b) || filepath.Ext(m[1]) != ".webm" {
		t.Fatalf("the stored clip %s: %q %v", m[1], b, err)
	}
	// A screen recording, as the seed shows it.
	code, out, errOut = a.cli(t, "nodes", "screen", "record", "--node", "my-iphone", "--duration", "15s", "--fps", "10")
	m = regexp.MustCompile(`^screen: (\S+)\n  (\d+) bytes, 15\.0 s, video/webm, sha256 ([0-9a-f]{64})\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("nodes screen record: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(m[1]); err != nil || string(b) != "screen 15000 ms 10 fps" || m[3] != sum(b) {
		t.Fatalf("the stored recording %s: %q %v", m[1], b, err)
	}
	// A node that declares a screen but has no display (a headless build
	// box: "a-headless" comes first in node.list): caps:screen goes on to
	// the node that has one. Screen 1 of several: --screen reaches the
	// node, for a recording and a picture.
	headless, _ := pairCameraNode(ctx, t, a, "a-headless", "SCREEN_CAPTURE_UNAVAILABLE")
	code, out, errOut = a.cli(t, "nodes", "screen", "record", "--node", "caps:screen", "--duration", "1s", "--fps", "2", "--screen", "1")
	m = regexp.MustCompile(`^screen: (\S+)\n`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("nodes screen record --screen 1: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(m[1]); err != nil || string(b) != "screen 1000 ms 2 fps screen 1" {
		t.Fatalf("the stored recording of screen 1 %s: %q %v", m[1], b, err)
	}
	code, out, errOut = a.cli(t, "nodes", "screen", "snapshot", "--node", "caps:screen", "--format", "jpeg", "--screen", "1")
	m = regexp.MustCompile(`^screen: (\S+)\n  (\d+) bytes, 40×30, image/jpeg, sha256 ([0-9a-f]{64})\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil || m[3] != sum(photos["screen"]) {
		t.Fatalf("nodes screen snapshot: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := a.cli(t, "nodes", "screen", "snapshot", "--node", dev, "--screen", "0"); code != 1 || !strings.Contains(errOut, "screen.snapshot NO_SCREEN: no screen 0 as png") {
		t.Fatalf("nodes screen snapshot of a screen the node lacks: exit %d, stderr %q", code, errOut)
	}
	// No node of the selector can: the last one's failure is the answer.
	if code, _, errOut := a.cli(t, "nodes", "screen", "snapshot", "--node", "caps:screen", "--screen", "0"); code != 1 ||
		!strings.Contains(errOut, "node my-iphone: screen.snapshot NO_SCREEN: no screen 0 as png") {
		t.Fatalf("nodes screen snapshot that no node can take: exit %d, stderr %q", code, errOut)
	}
	// The headless node named alone answers for itself.
	if code, _, errOut := a.cli(t, "nodes", "screen", "snapshot", "--node", headless); code != 1 ||
		!strings.Contains(errOut, "node a-headless: screen.snapshot SCREEN_CAPTURE_UNAVAILABLE: nothing to capture on a-headless") {
		t.Fatalf("nodes screen snapshot on the headless node: exit %d, stderr %q", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nodes", "screen", "record", "--node", dev, "--fps", "60"}, "want 1 to 30"},
		{[]string{"nodes", "screen", "snapshot", "--node", dev, "--format", "gif"}, "want png or jpeg"},
		{[]string{"nodes", "screen", "snapshot", "--node", dev, "--screen", "-3"}, "want 0 or more"},
		{[]string{"nodes", "screen"}, "nodes screen needs a subcommand: record, snapshot"},
		{[]string{"nodes", "screen", "record", "--node", dev, "--duration", "100ms"}, "want 0.5s to 60s"},
		{[]string{"nodes", "camera", "clip", "--node", dev, "--duration", "2m"}, "want 0.5s to 60s"},
		{[]string{"nodes", "camera", "clip", "--node", dev, "--facing", "both"}, "want front or back"},
		{[]string{"nodes", "camera", "clip", "--node", dev, "--duration", "20s", "--timeout", "10s"}, "must be longer than --duration"},
		{[]string{"nodes", "camera", "snap", "--node", dev, "--facing", "side"}, "want front, back or both"},
		{[]string{"nodes", "camera", "snap", "--node", dev, "--out", filepath.Join(outDir, "nosuch")}, "is not a directory"},
		{[]string{"nodes", "camera", "snap", "--node", dev, "--delay", "1m"}, "want 0 to 10s"},
		{[]string{"nodes", "camera"}, "nodes camera needs a subcommand: snap, clip"},
	} {
		if code, _, errOut := a.cli(t, tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
