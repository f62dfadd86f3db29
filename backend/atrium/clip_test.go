package atrium

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// liveWebM is a 2 s WebM written live, as MediaRecorder writes it (no
// Duration, no Cues); it skips the test without ffmpeg.
func liveWebM(t *testing.T) []byte {
	t.Helper()
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is needed (make deps installs it)")
	}
	p := filepath.Join(t.TempDir(), "live.webm")
	out, err := exec.Command(ffmpeg, "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10",
		"-t", "2", "-c:v", "libvpx", "-live", "1", "-f", "webm", p).CombinedOutput()
	if err != nil {
		t.Fatalf("make a live WebM: %v\n%s", err, out)
	}
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

// mediaNode pairs a node device declaring commands and answers each media
// command's request by sending file(params) over a pion data channel
// (rtc.Sender through node.media.offer) and then its result; it returns
// the node's client and device id.
func mediaNode(ctx context.Context, t *testing.T, a *App, admin *gateway.Client, commands []string, file func(command string) rtc.File) (*gateway.Client, string) {
	t.Helper()
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleNode}, commands)
	node, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode], Role: gateway.RoleNode,
		Caps: []string{"camera"}, Commands: commands})
	must(t, err)
	t.Cleanup(func() { node.Close() })
	dev := key.Public().ID()
	waitNode(ctx, t, a, dev, "")
	go func() {
		for ev := range node.Events() {
			var r nodes.InvokeRequestEvent
			if ev.Event != nodes.EventInvokeRequest || json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			var p struct{ Transfer struct{ ID string } }
			_ = json.Unmarshal(r.Params, &p)
			go func() {
				f := file(r.Command)
				f.ID = p.Transfer.ID
				var snd rtc.Sender
				_, err := snd.Send(ctx, f, func(ctx context.Context, sdp string) (string, error) {
					var a struct{ SDP string }
					err := node.Call(ctx, nodes.MethodMediaOffer, map[string]any{"transferId": f.ID, "sdp": sdp}, &a)
					return a.SDP, err
				})
				res := map[string]any{"id": r.ID, "ok": err == nil, "payload": map[string]any{}, "media": map[string]any{"id": f.ID, "transport": "webrtc"}}
				if err != nil {
					res["error"] = map[string]string{"code": "INTERNAL", "message": err.Error()}
				}
				_ = node.Call(ctx, nodes.MethodInvokeResult, res, nil)
			}()
		}
	}()
	return node, dev
}

// TestNodeClipRemuxed (issue 22): a camera.clip arriving as a WebM
// without a duration (as Chromium's MediaRecorder writes it) is remuxed by
// ffmpeg on the gateway before node.invoke answers: the stored file names
// its duration (ffprobe), the sidecar's sha256 and size are the file's on
// disk and its sourceSha256/sourceSize the node's, so the node's checksum
// stays provable. A photo is stored as sent.
func TestNodeClipRemuxed(t *testing.T) {
	clip := liveWebM(t)
	ffprobe, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Skip("ffprobe is needed (make deps installs it)")
	}
	photo := testJPEG(t, 32, 24)
	a, _ := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "clip-admin")
	_, dev := mediaNode(ctx, t, a, admin, []string{"camera.clip", "camera.snap"}, func(command string) rtc.File {
		if command == "camera.snap" {
			return rtc.File{Name: "photo.jpg", Data: bytes.NewReader(photo), Size: int64(len(photo)), MIME: "image/jpeg"}
		}
		return rtc.File{Name: "clip.webm", Data: bytes.NewReader(clip), Size: int64(len(clip)), MIME: "video/webm;codecs=vp8", DurationMs: 2000}
	})
	invoke := func(command string) nodes.Media {
		t.Helper()
		var r nodes.InvokeResult
		must(t, admin.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": dev, "command": command, "params": map[string]any{}, "timeoutMs": 60000}, &r))
		var m nodes.Media
		if !r.OK || json.Unmarshal(r.Media, &m) != nil {
			t.Fatalf("%s: %+v", command, r)
		}
		return m
	}
	m := invoke("camera.clip")
	data, err := os.ReadFile(m.Path)
	must(t, err)
	sum, src := sha256.Sum256(data), sha256.Sum256(clip)
	if m.SHA256 != hex.EncodeToString(sum[:]) || m.Size != int64(len(data)) || m.SourceSHA256 != hex.EncodeToString(src[:]) || m.SourceSize != int64(len(clip)) {
		t.Fatalf("the clip's sidecar %+v: on disk %x (%d bytes), sent %x (%d bytes)", m.Meta, sum, len(data), src, len(clip))
	}
	if stored, err := a.Media.Get(m.ID); err != nil || stored != m.Meta {
		t.Fatalf("the stored sidecar %+v (%v), node.invoke said %+v", stored, err, m.Meta)
	}
	out, err := exec.Command(ffprobe, "-v", "error", "-show_entries", "format=duration", "-of", "default=nw=1:nk=1", m.Path).Output()
	if d := strings.TrimSpace(string(out)); err != nil || d == "N/A" || d == "" {
		t.Fatalf("the stored clip's duration %q (%v), want one", d, err)
	}
	p := invoke("camera.snap")
	sp := sha256.Sum256(photo)
	if p.SHA256 != hex.EncodeToString(sp[:]) || p.SourceSHA256 != "" {
		t.Fatalf("the photo's sidecar %+v", p.Meta)
	}
}
