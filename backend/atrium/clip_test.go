package atrium

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
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
	return mediaNodeSeeing(ctx, t, a, admin, commands, file, nil)
}

// mediaNodeSeeing is mediaNode telling seen (when not nil) the name of
// every event its connection gets, in order.
func mediaNodeSeeing(ctx context.Context, t *testing.T, a *App, admin *gateway.Client, commands []string, file func(command string) rtc.File, seen func(event string)) (*gateway.Client, string) {
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
			if seen != nil {
				seen(ev.Event)
			}
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

// gatedReader lets the first `free` ReadAt calls through and holds the
// next ones until release is closed (or ctx ends): a node that stops
// sending in the middle of a file.
type gatedReader struct {
	r       *bytes.Reader
	ctx     context.Context
	mu      sync.Mutex
	free    int
	release chan struct{}
}

func (g *gatedReader) ReadAt(p []byte, off int64) (int, error) {
	g.mu.Lock()
	g.free--
	held := g.free < 0
	g.mu.Unlock()
	if held {
		select {
		case <-g.release:
		case <-g.ctx.Done():
			return 0, g.ctx.Err()
		}
	}
	return g.r.ReadAt(p, off)
}

// TestNodeMediaResumesOnNewConnection (issue 22): a phone page killed in
// the middle of a transfer and opened again resumes it. The node's
// connection ends after some blocks were stored (its pion connection is
// cut as well); node.invoke does not fail but waits; the same device,
// connected again, offers the same transfer, sends only the missing
// blocks, and node.invoke answers with the file (the right SHA-256,
// payload {resumed:true}). Another device's offer for it is refused, and
// so is the same device's from another address (127.0.0.9).
func TestNodeMediaResumesOnNewConnection(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "resume-admin")
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	sum := sha256.Sum256(data)
	commands := []string{"camera.clip"}
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleNode}, commands)
	dial := func() *gateway.Client {
		c, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode], Role: gateway.RoleNode,
			Caps: []string{"camera"}, Commands: commands})
		must(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	offerOn := func(c *gateway.Client, id string) rtc.Signal {
		return func(ctx context.Context, sdp string) (string, error) {
			var r struct{ SDP string }
			err := c.Call(ctx, nodes.MethodMediaOffer, map[string]any{"transferId": id, "sdp": sdp}, &r)
			return r.SDP, err
		}
	}
	first := dial()
	dev := key.Public().ID()
	waitNode(ctx, t, a, dev, "")

	type answer struct {
		r   nodes.InvokeResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var r nodes.InvokeResult
		err := admin.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": dev, "command": "camera.clip", "params": map[string]any{}, "timeoutMs": 90000}, &r)
		done <- answer{r, err}
	}()
	var transfer string
	for ev := range first.Events() {
		var r nodes.InvokeRequestEvent
		if ev.Event == nodes.EventInvokeRequest && json.Unmarshal(ev.Payload, &r) == nil {
			var p struct{ Transfer struct{ ID string } }
			must(t, json.Unmarshal(r.Params, &p))
			transfer = p.Transfer.ID
			break
		}
	}
	blocks := media.NumBlocks(int64(len(data)), 64<<10)
	sctx, scut := context.WithCancel(ctx)
	gate := &gatedReader{r: bytes.NewReader(data), ctx: sctx, free: blocks + 10, release: make(chan struct{})}
	sendErr := make(chan error, 1)
	go func() {
		var snd rtc.Sender
		_, err := snd.Send(sctx, rtc.File{ID: transfer, Name: "clip.bin", Data: gate, Size: int64(len(data)), MIME: "application/octet-stream"}, offerOn(first, transfer))
		sendErr <- err
	}()
	partial := filepath.Join(a.Layout.MediaDir(), ".partial", transfer, "data")
	for {
		if st, err := os.Stat(partial); err == nil && st.Size() > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no block of the transfer was stored")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The page dies: its WebSocket and its peer connection go.
	first.Close()
	scut()
	if err := <-sendErr; err == nil {
		t.Fatal("the cut send succeeded")
	}
	select {
	case a := <-done:
		t.Fatalf("node.invoke ended when the node went away mid-transfer: %+v %v", a.r, a.err)
	case <-time.After(200 * time.Millisecond): // it waits (no answer expected; not a timing assertion)
	}

	// Another device may not take the transfer over.
	okey, otoks := pairDevice(ctx, t, a, admin, []string{gateway.RoleNode}, commands)
	other, err := deviceDial(ctx, t, a, okey, gateway.ClientOptions{DeviceToken: otoks[gateway.RoleNode], Role: gateway.RoleNode, Caps: []string{"camera"}, Commands: commands})
	must(t, err)
	defer other.Close()
	if _, err := offerOn(other, transfer)(ctx, "v=0\r\na=fingerprint:sha-256 AB\r\n"); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("another device's offer for the detached transfer: %v, want FORBIDDEN", err)
	}

	// Nor may the same device from another address (ICE is bound to the
	// one the transfer was asked at).
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}
	elsewhere, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode], Role: gateway.RoleNode,
		Caps: []string{"camera"}, Commands: commands, HTTPClient: &http.Client{Transport: &http.Transport{DialContext: from.DialContext}}})
	must(t, err)
	if _, err := offerOn(elsewhere, transfer)(ctx, "v=0\r\na=fingerprint:sha-256 AB\r\n"); errCode(err) != gateway.CodeForbidden || !strings.Contains(err.Error(), "another address") {
		t.Fatalf("the device's offer from 127.0.0.9: %v, want FORBIDDEN (another address)", err)
	}
	elsewhere.Close()

	// The page is opened again: the same device resumes the transfer.
	second := dial()
	waitNode(ctx, t, a, dev, "")
	var snd rtc.Sender
	sent, err := snd.Send(ctx, rtc.File{ID: transfer, Name: "clip.bin", Data: bytes.NewReader(data), Size: int64(len(data)), MIME: "application/octet-stream"}, offerOn(second, transfer))
	if err != nil {
		t.Fatalf("the resumed send: %v", err)
	}
	if sent.Blocks != blocks || sent.BlocksSent == 0 || sent.BlocksSent >= blocks {
		t.Errorf("the resume sent %d of %d blocks, want only the missing ones", sent.BlocksSent, blocks)
	}
	ans := <-done
	if ans.err != nil || !ans.r.OK {
		t.Fatalf("node.invoke after the resume: %+v %v", ans.r, ans.err)
	}
	var m nodes.Media
	must(t, json.Unmarshal(ans.r.Media, &m))
	got, err := os.ReadFile(m.Path)
	if err != nil || !bytes.Equal(got, data) || m.SHA256 != hex.EncodeToString(sum[:]) || m.ID != transfer || string(ans.r.Payload) != `{"resumed":true}` {
		t.Fatalf("the resumed file %+v (%d bytes, %v), payload %s", m.Meta, len(got), err, ans.r.Payload)
	}
	t.Logf("resumed: %d of %d blocks sent again", sent.BlocksSent, blocks)
}

// TestMediaReadAndEvents (issue 22): media.added reaches the person's
// connections and an operator device scoped admin once a node's file is
// stored, media.deleted after media.delete; a device scoped below admin
// and the node get neither (everything before a later event each does
// get is checked). media.read serves a 2.5 MiB clip in pieces of at most
// 1 MiB that assemble to the file, with the file's size and SHA-256;
// a length over 1 MiB or an offset past the end is INVALID_REQUEST.
func TestMediaReadAndEvents(t *testing.T) {
	a, admin, ctx := scopeApp(t)
	data := make([]byte, 5<<19)
	for i := range data {
		data[i] = byte(i*31 + i>>9)
	}
	sum := sha256.Sum256(data)
	var mu sync.Mutex
	var nodeSaw []string
	_, dev := mediaNodeSeeing(ctx, t, a, admin, []string{"camera.clip"}, func(string) rtc.File {
		return rtc.File{Name: "clip.mp4", Data: bytes.NewReader(data), Size: int64(len(data)), MIME: "video/mp4", DurationMs: 3000}
	}, func(ev string) {
		mu.Lock()
		nodeSaw = append(nodeSaw, ev)
		mu.Unlock()
	})
	adminPhone, _ := scopedPhone(ctx, t, a, admin, "admin")
	lowPhone, _ := scopedPhone(ctx, t, a, admin, "authenticated")

	var r nodes.InvokeResult
	must(t, admin.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": dev, "command": "camera.clip", "params": map[string]any{}, "timeoutMs": 60000}, &r))
	var m nodes.Media
	if !r.OK || json.Unmarshal(r.Media, &m) != nil {
		t.Fatalf("camera.clip: %+v", r)
	}
	for name, c := range map[string]*gateway.Client{"the person": admin, "a phone scoped admin": adminPhone} {
		var added media.Meta
		must(t, json.Unmarshal(waitEventFrom(ctx, t, c, "media.added", m.ID), &added))
		if added != m.Meta {
			t.Errorf("%s: media.added %+v, want %+v", name, added, m.Meta)
		}
	}

	// media.read in pieces.
	var whole []byte
	for off := 0; ; {
		var p struct {
			ID         string
			Offset     int
			Length     int
			Size       int64
			SHA256     string `json:"sha256"`
			EOF        bool
			DataBase64 string
		}
		must(t, adminPhone.Call(ctx, "media.read", map[string]any{"id": m.ID, "offset": off, "length": 1 << 20}, &p))
		b, err := base64.StdEncoding.DecodeString(p.DataBase64)
		must(t, err)
		if p.Offset != off || p.Length != len(b) || p.Size != int64(len(data)) || p.SHA256 != hex.EncodeToString(sum[:]) || len(b) > 1<<20 {
			t.Fatalf("media.read at %d: %+v (%d bytes)", off, p, len(b))
		}
		whole = append(whole, b...)
		off += len(b)
		if p.EOF {
			break
		}
		if len(b) == 0 {
			t.Fatal("media.read returned nothing before the end")
		}
	}
	if !bytes.Equal(whole, data) {
		t.Fatalf("media.read assembled %d bytes, not the file's %d", len(whole), len(data))
	}
	for _, bad := range []map[string]any{{"id": m.ID, "offset": 0, "length": 1<<20 + 1}, {"id": m.ID, "offset": len(data) + 1},
		{"id": m.ID, "offset": -1}, {"id": "../x", "offset": 0}} {
		if err := admin.Call(ctx, "media.read", bad, nil); errCode(err) != gateway.CodeInvalidRequest {
			t.Errorf("media.read %v: %v, want INVALID_REQUEST", bad, err)
		}
	}
	if err := lowPhone.Call(ctx, "media.read", map[string]any{"id": m.ID}, nil); errCode(err) != gateway.CodeForbidden {
		t.Errorf("media.read by a phone scoped authenticated: %v, want FORBIDDEN", err)
	}

	must(t, admin.Call(ctx, "media.delete", map[string]any{"id": m.ID}, nil))
	for name, c := range map[string]*gateway.Client{"the person": admin, "a phone scoped admin": adminPhone} {
		if got := waitEventFrom(ctx, t, c, "media.deleted", m.ID); !strings.Contains(string(got), m.ID) {
			t.Errorf("%s: media.deleted %s", name, got)
		}
	}

	// The phone scoped below admin: everything before the sentinel (a
	// write to a shared note it may read) is no media event.
	must(t, admin.Call(ctx, "memory.write", map[string]any{"path": "memory/shared/sentinel.md", "content": "- sentinel\n", "mode": "append"}, nil))
	for {
		var ev gateway.EventFrame
		select {
		case ev = <-lowPhone.Events():
		case <-ctx.Done():
			t.Fatal("no memory.changed for the sentinel on the phone scoped authenticated")
		}
		if strings.HasPrefix(ev.Event, "media.") {
			t.Errorf("the phone scoped authenticated got %s %s", ev.Event, ev.Payload)
		}
		if ev.Event == "memory.changed" && strings.Contains(string(ev.Payload), "sentinel") {
			break
		}
	}
	// The node: everything before its next request is no media event.
	must(t, admin.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": dev, "command": "camera.clip", "params": map[string]any{}, "timeoutMs": 60000}, &r))
	mu.Lock()
	defer mu.Unlock()
	requests := 0
	for _, ev := range nodeSaw {
		if strings.HasPrefix(ev, "media.") {
			t.Errorf("the node got %s (all it got: %v)", ev, nodeSaw)
		}
		if ev == nodes.EventInvokeRequest {
			requests++
		}
	}
	if requests != 2 {
		t.Errorf("the node saw %v, want two requests", nodeSaw)
	}
}

// waitEventFrom waits for event name whose payload mentions id.
func waitEventFrom(ctx context.Context, t *testing.T, c *gateway.Client, name, id string) json.RawMessage {
	t.Helper()
	for {
		p := waitEvent(ctx, t, c, name)
		if strings.Contains(string(p), id) {
			return p
		}
	}
}
