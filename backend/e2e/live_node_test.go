package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/capture/xvfbtest"
)

// TestNodeHostLive (issue 22 item 3): `atrium node` as a real process on a
// virtual X display, paired with the real app, declares camera.live and
// screen.live (ffmpeg is installed); the person's live view of its screen
// gets the WebM ffmpeg encodes (VP8, the stream's header first) as
// live.chunk events with an age, "save the last 2 s" lands a clip ffprobe
// decodes at the asked width, live.stop ends it on both sides, and a
// camera.live without a camera is refused with NO_CAMERA.
func TestNodeHostLive(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the app, Xvfb and a node")
	}
	ffprobe, err := exec.LookPath("ffprobe")
	if _, ferr := exec.LookPath("ffmpeg"); ferr != nil || err != nil {
		t.Skip("e2e: ffmpeg and ffprobe (Debian ffmpeg) are needed; `make deps` installs them")
	}
	display := xvfbtest.Start(t, "640x480")
	g := startMediaGateway(t, t.TempDir())
	_, id, _ := g.pairNode(t, "live-node", []string{"DISPLAY=" + display, "TMPDIR=" + t.TempDir()}, []string{"camera.live", "screen.live"}, nil)

	viewer := newAdminSession(t, g.uiURL)
	var open struct{ ViewID, MimeType string }
	if err := json.Unmarshal(viewer.call("live.open", map[string]any{"nodeId": id, "source": "screen", "fps": 5, "maxWidth": 320}), &open); err != nil {
		t.Fatal(err)
	}
	if open.ViewID == "" || open.MimeType != "video/webm;codecs=vp8" {
		t.Fatalf("live.open: %+v", open)
	}
	var stream []byte
	aged := 0
	deadline := time.After(90 * time.Second)
	for aged < 5 || len(stream) < 2000 {
		select {
		case f, ok := <-viewer.events:
			if !ok {
				t.Fatal("the viewer's connection closed")
			}
			if f.Event == "live.ended" {
				t.Fatalf("the view ended: %s", f.Payload)
			}
			if f.Event != "live.chunk" {
				continue
			}
			var c struct {
				ViewID, Data string
				AgeMs        *float64
			}
			if err := json.Unmarshal(f.Payload, &c); err != nil || c.ViewID != open.ViewID {
				t.Fatalf("live.chunk %s: %v", f.Payload, err)
			}
			b, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				t.Fatal(err)
			}
			stream = append(stream, b...)
			if c.AgeMs != nil {
				aged++
			}
		case <-deadline:
			t.Fatalf("after 90 s: %d bytes, %d chunks with an age", len(stream), aged)
		}
	}
	if !bytes.HasPrefix(stream, []byte{0x1a, 0x45, 0xdf, 0xa3}) {
		t.Fatalf("the stream does not start with the WebM header: % x", stream[:min(8, len(stream))])
	}

	// Save the last 2 s (once a keyframe is in: retried while it is not).
	var saved struct {
		Path, Command, MIME string
		DurationMs          int64
	}
	for try := 0; ; try++ {
		raw, err := viewer.try("live.save", map[string]any{"viewId": open.ViewID, "seconds": 2})
		if err == nil {
			if err := json.Unmarshal(raw, &saved); err != nil {
				t.Fatal(err)
			}
			break
		}
		if try > 60 || !strings.Contains(err.Error(), "no keyframe") {
			t.Fatalf("live.save: %v", err)
		}
		time.Sleep(time.Second)
	}
	if saved.Command != "live.save" || saved.MIME != "video/webm" {
		t.Fatalf("live.save: %+v", saved)
	}
	out, err := exec.Command(ffprobe, "-v", "error", "-select_streams", "v", "-show_entries", "stream=codec_name,width", "-of", "csv=p=0", saved.Path).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "vp8,320" {
		t.Fatalf("ffprobe of the saved clip: %v %q", err, out)
	}

	if n := liveEncoders(display); n != 1 {
		t.Fatalf("%d live encoders of %s run during the view, want 1", n, display)
	}
	var st struct{ Stopped bool }
	if err := json.Unmarshal(viewer.call("live.stop", map[string]any{"viewId": open.ViewID}), &st); err != nil || !st.Stopped {
		t.Fatalf("live.stop: %+v %v", st, err)
	}
	// The node ends its encoder (no live ffmpeg of this display is left),
	// and a new view of the same node opens.
	waitNoEncoder(t, display)
	if err := json.Unmarshal(viewer.call("live.open", map[string]any{"nodeId": id, "source": "screen", "fps": 5, "maxWidth": 320}), &open); err != nil {
		t.Fatal(err)
	}
	viewer.call("live.stop", map[string]any{"viewId": open.ViewID})
	waitNoEncoder(t, display)

	if _, err := viewer.try("live.open", map[string]any{"nodeId": id, "source": "camera"}); err == nil || !strings.Contains(err.Error(), "NO_CAMERA") {
		t.Fatalf("camera.live without a camera: %v, want NO_CAMERA", err)
	}
}

// waitNoEncoder waits (bounded) until no ffmpeg live encoder of display
// runs (its command line read from /proc).
func waitNoEncoder(t *testing.T, display string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := liveEncoders(display)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d live encoders of %s still run after the view ended", n, display)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// liveEncoders counts the ffmpeg live encoders of display.
func liveEncoders(display string) int {
	n := 0
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte("-cluster_time_limit")) && bytes.Contains(b, []byte(display)) {
			n++
		}
	}
	return n
}
