package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/capture/xvfbtest"
)

// solidPNG is a w×h PNG: left half c1, right half c2.
func solidPNG(t *testing.T, w, h int, c1, c2 color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := c1
			if x >= w/2 {
				c = c2
			}
			img.SetRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// paintRoot sets X screen display's root window to picture (ImageMagick's
// display -window root); false when ImageMagick is not installed.
func paintRoot(t *testing.T, display string, picture []byte) bool {
	t.Helper()
	exe, err := exec.LookPath("display")
	if err != nil {
		return false
	}
	f := filepath.Join(t.TempDir(), "root.png")
	if err := os.WriteFile(f, picture, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-window", "root", f)
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	// display may exit non-zero after setting the background: the pixels
	// read back below are what counts.
	_ = cmd.Run()
	return true
}

// pairNode starts `atrium node` with env, approves its pairing request
// (checking that it lists wantCommands and, when given, not notCommands)
// and waits until it is connected; it returns the node, its id and its
// --json starting line.
func (g *mediaGateway) pairNode(t *testing.T, name string, env []string, wantCommands, notCommands []string) (*nodeProc, string, map[string]any) {
	t.Helper()
	var code struct{ URL string }
	if err := json.Unmarshal(g.admin.call("device.pair.code", nil), &code); err != nil {
		t.Fatal(err)
	}
	n := startNodeEnv(t, g.bin, filepath.Join(t.TempDir(), "node"), env, "--url", code.URL, "--name", name)
	start := n.waitState(t, "starting")
	pend := n.waitState(t, "pending")
	id, _ := pend["deviceId"].(string)
	var reqs struct {
		Pending []struct {
			RequestID, DeviceID string
			Commands, Caps      []string
		}
	}
	if err := json.Unmarshal(g.admin.call("device.pair.list", nil), &reqs); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(reqs.Pending, func(r struct {
		RequestID, DeviceID string
		Commands, Caps      []string
	}) bool {
		return r.DeviceID == id
	})
	if i < 0 {
		t.Fatalf("no pairing request of %s in %+v", id, reqs)
	}
	r := reqs.Pending[i]
	for _, c := range wantCommands {
		if !slices.Contains(r.Commands, c) {
			t.Fatalf("%s's pairing request lists %v, not %s", name, r.Commands, c)
		}
	}
	for _, c := range notCommands {
		if slices.Contains(r.Commands, c) {
			t.Fatalf("%s's pairing request lists %s: %v", name, c, r.Commands)
		}
	}
	g.admin.call("device.pair.approve", map[string]any{"requestId": r.RequestID})
	n.waitState(t, "paired")
	g.admin.waitConnected(id)
	return n, id, start
}

// TestNodeHostScreenFFmpeg (issue 22): `atrium node` as a real process on a
// virtual X display (Xvfb, two X screens of 640×480 and 320×240), paired
// with the real app over pinned TLS, declares the media commands because
// ffmpeg is installed (its pairing request lists them with caps camera and
// screen); screen.snapshot sends a PNG over a WebRTC data channel (pion on
// both ends) that lands in $ATRIUM_HOME/media with the node's SHA-256, the
// size of the Xvfb screen and the colours painted on it, screen 1 picked
// with {screen: 1}; screen.record 2 s → an H.264 MP4 ffprobe accepts;
// camera.snap without a camera is NO_CAMERA. A node whose PATH has no
// ffmpeg says at start which commands it leaves out and why, does not
// declare them, and an invoke of one is refused.
func TestNodeHostScreenFFmpeg(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the app, Xvfb and two nodes")
	}
	ffprobe, err := exec.LookPath("ffprobe")
	if _, ferr := exec.LookPath("ffmpeg"); ferr != nil || err != nil {
		t.Skip("e2e: ffmpeg and ffprobe (Debian ffmpeg) are needed; `make deps` installs them")
	}
	display := xvfbtest.Start(t, "640x480", "320x240")
	red, blue, green := color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255}, color.RGBA{0, 255, 0, 255}
	painted := paintRoot(t, display+".0", solidPNG(t, 640, 480, red, blue)) &&
		paintRoot(t, display+".1", solidPNG(t, 320, 240, green, green))
	if !painted {
		t.Log("ImageMagick's display is not installed: the screens' colours are not checked, only their sizes")
	}
	g := startMediaGateway(t, t.TempDir())
	media := []string{"camera.list", "camera.snap", "camera.clip", "screen.snapshot", "screen.record", "camera.live", "screen.live"}
	tmp := t.TempDir() // the node's temporary files
	node, id, start := g.pairNode(t, "xvfb-node", []string{"DISPLAY=" + display, "TMPDIR=" + tmp}, media, nil)
	if _, ok := start["leftOut"]; ok {
		t.Fatalf("a node with ffmpeg left out %v", start["leftOut"])
	}

	// screen.snapshot of the display as $DISPLAY names it (screen 0), and of screen 1.
	for _, c := range []struct {
		params      map[string]any
		w, h        int
		left, right color.RGBA
	}{
		{map[string]any{"format": "png"}, 640, 480, red, blue},
		{map[string]any{"format": "png", "screen": 1}, 320, 240, green, green},
	} {
		res := g.invokeMedia(t, id, "screen.snapshot", c.params, 120000)
		if !res.OK || res.Media == nil {
			t.Fatalf("screen.snapshot %v: %+v", c.params, res)
		}
		if res.Media.MIME != "image/png" || res.Media.Width != c.w || res.Media.Height != c.h || res.Payload.Width != c.w ||
			res.Media.Transport != "webrtc" || res.Media.Command != "screen.snapshot" || res.Media.Device != id {
			t.Fatalf("screen.snapshot %v: media %+v payload %+v, want a %d×%d PNG", c.params, res.Media, res.Payload, c.w, c.h)
		}
		data := g.stored(t, res, res.Payload.SHA256)
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil || img.Bounds().Dx() != c.w || img.Bounds().Dy() != c.h {
			t.Fatalf("the stored PNG: %v %v", img.Bounds(), err)
		}
		if painted {
			for _, p := range []struct {
				x    int
				want color.RGBA
			}{{10, c.left}, {c.w - 10, c.right}} {
				if got := color.RGBAModel.Convert(img.At(p.x, c.h/2)).(color.RGBA); got != p.want {
					t.Errorf("screen.snapshot %v: pixel (%d,%d) is %v, want %v", c.params, p.x, c.h/2, got, p.want)
				}
			}
		}
	}
	if res := g.invokeMedia(t, id, "screen.snapshot", map[string]any{"screen": 7}, 120000); res.OK || res.Error == nil || res.Error.Code != "NO_SCREEN" {
		t.Fatalf("screen.snapshot of screen 7: %+v", res)
	}

	// screen.record 2 s at 5 fps.
	res := g.invokeMedia(t, id, "screen.record", map[string]any{"durationMs": 2000, "fps": 5}, 120000)
	if !res.OK || res.Media == nil || res.Media.MIME != "video/mp4" || res.Media.Width != 640 || res.Media.Height != 480 || res.Media.DurationMs < 1500 {
		t.Fatalf("screen.record: %+v %+v", res, res.Media)
	}
	g.stored(t, res, res.Payload.SHA256)
	file := filepath.Join(g.home, "media", res.Media.File)
	out, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", file).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "h264,640,480" {
		t.Fatalf("ffprobe %s: %q %v", file, out, err)
	}
	if ms := contentMs(t, ffprobe, file); ms < 1500 || ms > 3000 {
		t.Errorf("the recording holds %.0f ms, want about 2000", ms)
	}

	// The invoker goes away during a 60 s recording: the gateway sends
	// node.media.cancel, the node stops ffmpeg and removes its file, and
	// nothing is stored.
	before := len(g.mediaFiles(t))
	quitter := newAdminSession(t, g.uiURL)
	go quitter.try("node.invoke", map[string]any{"nodeId": id, "command": "screen.record", "params": map[string]any{"durationMs": 60000, "fps": 2}, "timeoutMs": 120000})
	waitUntil(t, "the node's recording to start", func() bool {
		d, _ := filepath.Glob(filepath.Join(tmp, "atrium-capture-*"))
		return len(d) == 1
	})
	quitter.c.CloseNow()
	waitUntil(t, "the node to hear node.media.cancel", func() bool {
		return strings.Contains(node.log(), "media transfer cancelled by the gateway")
	})
	waitUntil(t, "the node's recording removed", func() bool {
		d, _ := filepath.Glob(filepath.Join(tmp, "atrium-capture-*"))
		return len(d) == 0
	})
	if after := g.mediaFiles(t); len(after) != before {
		t.Fatalf("a cancelled recording left %v in the media folder", after)
	}

	// No V4L2 camera on this machine (none in CI either): a clear NO_CAMERA.
	if cams, _ := filepath.Glob("/dev/video*"); len(cams) == 0 {
		if res := g.invokeMedia(t, id, "camera.snap", map[string]any{}, 120000); res.OK || res.Error == nil || res.Error.Code != "NO_CAMERA" ||
			!strings.Contains(res.Error.Message, "/dev/video*") {
			t.Fatalf("camera.snap without a camera: %+v", res)
		}
	} else {
		t.Logf("this machine has %v: the no-camera answer is left to the unit tests", cams)
	}
	node.stop()

	// A node whose PATH holds no ffmpeg.
	bare, bareID, start := g.pairNode(t, "bare-node", []string{"DISPLAY=" + display, "PATH=" + t.TempDir()}, []string{"system.run"}, media)
	reason, _ := start["leftOutReason"].(string)
	if left, _ := start["leftOut"].([]any); len(left) != len(media) || !strings.Contains(reason, "ffmpeg not found") || !strings.Contains(reason, "install") {
		t.Fatalf("the bare node's start: %v", start)
	}
	if _, err := g.admin.try("node.invoke", map[string]any{"nodeId": bareID, "command": "screen.snapshot", "params": map[string]any{}, "timeoutMs": 60000}); err == nil ||
		!strings.Contains(err.Error(), "may not run screen.snapshot") {
		t.Fatalf("screen.snapshot on the node without ffmpeg: %v", err)
	}
	bare.stop()
}
