package atrium

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// testJPEG is a w×h JPEG.
func testJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 0x80, 0xff})
		}
	}
	var b bytes.Buffer
	must(t, jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}))
	return b.Bytes()
}

// TestNodeCameraSnapOverWebRTC (issue 22): on the real app, admin invokes
// camera.snap on a paired node; the gateway expects the transfer before it
// sends the request (transfer:{id, maxSize} in the params), the node
// offers it through node.media.offer and sends the photo over a pion data
// channel, its result names the transfer, and node.invoke's answer carries
// the stored file's sidecar and path. Refused and audited: an offer for a
// transfer nobody asked for, another node's offer for this one, and a
// result without the transfer (then nothing is stored); a timed-out invoke
// sends the node node.media.cancel.
func TestNodeCameraSnapOverWebRTC(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "snap-admin")
	photo := testJPEG(t, 64, 48)
	sum := sha256.Sum256(photo)

	dial := func(commands []string) (*gateway.Client, string) {
		key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleNode}, commands)
		c, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode], Role: gateway.RoleNode,
			Caps: []string{"camera"}, Commands: commands})
		must(t, err)
		t.Cleanup(func() { c.Close() })
		return c, key.Public().ID()
	}
	other, _ := dial([]string{"camera.list"})
	node, dev := dial([]string{"camera.snap"})
	waitNode(ctx, t, a, dev, "")

	offer := func(c *gateway.Client, id, sdp string) (string, error) {
		var r struct{ SDP string }
		err := c.Call(ctx, nodes.MethodMediaOffer, map[string]any{"transferId": id, "sdp": sdp}, &r)
		return r.SDP, err
	}
	// A node pushing a transfer nobody asked for.
	if _, err := offer(node, media.NewID(), "v=0\r\na=fingerprint:sha-256 AB\r\n"); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("an unrequested offer: %v, want FORBIDDEN", err)
	}
	if e, err := a.Audit.Tail(1, audit.Filter{}); err != nil || len(e) != 1 || e[0].Operation != nodes.MethodMediaOffer || e[0].Result != audit.Denied {
		t.Fatalf("the unrequested offer's audit: %+v %v", e, err)
	}

	cancels := make(chan string, 4)
	type seen struct {
		transfer struct {
			ID      string `json:"id"`
			MaxSize int64  `json:"maxSize"`
		}
		otherErr error
	}
	seenCh := make(chan seen, 4)
	go func() {
		for ev := range node.Events() {
			if ev.Event == nodes.EventMediaCancel {
				var c struct{ TransferID string }
				_ = json.Unmarshal(ev.Payload, &c)
				cancels <- c.TransferID
				continue
			}
			var r nodes.InvokeRequestEvent
			if ev.Event != nodes.EventInvokeRequest || json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			var p struct {
				Mode     string
				Transfer json.RawMessage
			}
			_ = json.Unmarshal(r.Params, &p)
			var s seen
			_ = json.Unmarshal(p.Transfer, &s.transfer)
			go func() {
				switch p.Mode {
				case "silent": // never answers: the invoke times out
					seenCh <- s
					return
				case "nomedia":
					seenCh <- s
					_ = node.Call(ctx, nodes.MethodInvokeResult, map[string]any{"id": r.ID, "ok": true, "payload": map[string]any{}}, nil)
					return
				}
				// Another node's offer for this transfer is refused.
				_, s.otherErr = offer(other, s.transfer.ID, "v=0\r\na=fingerprint:sha-256 AB\r\n")
				seenCh <- s
				var snd rtc.Sender
				_, err := snd.Send(ctx, rtc.File{ID: s.transfer.ID, Name: "photo.jpg", Data: bytes.NewReader(photo), Size: int64(len(photo)), MIME: "image/jpeg"},
					func(ctx context.Context, sdp string) (string, error) { return offer(node, s.transfer.ID, sdp) })
				res := map[string]any{"id": r.ID, "ok": err == nil, "payload": map[string]any{"width": 64, "height": 48},
					"media": map[string]any{"id": s.transfer.ID, "transport": "webrtc"}}
				if err != nil {
					res["error"] = map[string]string{"code": "INTERNAL", "message": err.Error()}
				}
				_ = node.Call(ctx, nodes.MethodInvokeResult, res, nil)
			}()
		}
	}()
	wantCancel := func(id string) {
		t.Helper()
		select {
		case got := <-cancels:
			if got != id {
				t.Fatalf("node.media.cancel for %s, want %s", got, id)
			}
		case <-ctx.Done():
			t.Fatalf("no node.media.cancel for %s", id)
		}
	}
	invoke := func(params map[string]any, timeoutMs int) (nodes.InvokeResult, error) {
		var r nodes.InvokeResult
		err := admin.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": dev, "command": "camera.snap", "params": params, "timeoutMs": timeoutMs}, &r)
		return r, err
	}

	r, err := invoke(map[string]any{"maxWidth": 64, "transfer": map[string]string{"id": "chosen-by-the-caller"}}, 60000)
	s := <-seenCh
	if err != nil || !r.OK {
		t.Fatalf("camera.snap: %+v %v", r, err)
	}
	if !media.ValidID(s.transfer.ID) || s.transfer.MaxSize != 0 {
		t.Errorf("the request's transfer %+v, want a fresh id", s.transfer)
	}
	if errCode(s.otherErr) != gateway.CodeForbidden {
		t.Errorf("another node's offer for the transfer: %v, want FORBIDDEN", s.otherErr)
	}
	var m nodes.Media
	must(t, json.Unmarshal(r.Media, &m))
	if m.ID != s.transfer.ID || m.SHA256 != hex.EncodeToString(sum[:]) || m.Size != int64(len(photo)) || m.Width != 64 || m.Height != 48 ||
		m.MIME != "image/jpeg" || m.Transport != media.TransportWebRTC || m.Command != "camera.snap" || m.Device != dev ||
		m.Path != filepath.Join(a.Layout.MediaDir(), m.ID+".jpg") {
		t.Fatalf("node.invoke's media %+v", m)
	}
	if got, err := os.ReadFile(m.Path); err != nil || !bytes.Equal(got, photo) {
		t.Fatalf("the stored photo: %d bytes, %v", len(got), err)
	}

	// A result that does not name its transfer fails, and its ticket is gone.
	r, err = invoke(map[string]any{"mode": "nomedia"}, 60000)
	s = <-seenCh
	if err != nil || r.OK || r.Error == nil || r.Error.Code != "INVALID_RESULT" {
		t.Fatalf("a result without the transfer: %+v %v", r, err)
	}
	if _, err := offer(node, s.transfer.ID, "v=0\r\na=fingerprint:sha-256 AB\r\n"); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("an offer after the invoke ended: %v, want FORBIDDEN", err)
	}
	wantCancel(s.transfer.ID)
	// No answer in time: TIMEOUT, and the node is told to stop.
	if _, err = invoke(map[string]any{"mode": "silent"}, 300); errCode(err) != gateway.CodeTimeout {
		t.Fatalf("a silent node: %v, want TIMEOUT", err)
	}
	s = <-seenCh
	wantCancel(s.transfer.ID)
	list, err := a.Media.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("the media folder holds %+v (%v), want the one photo", list, err)
	}
}
