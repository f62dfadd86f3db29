package nodehost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/capture"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// scriptFFmpeg is an "ffmpeg" that copies picture to its last argument
// (the output file), so the node's media path runs without a display.
func scriptFFmpeg(t *testing.T, picture []byte) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.png")
	if err := os.WriteFile(src, picture, 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "ffmpeg")
	script := "#!/bin/sh\nfor a in \"$@\"; do last=\"$a\"; done\ncp '" + src + "' \"$last\"\n"
	if err := os.WriteFile(p, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 0x40, 0xff})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func newTestHost(t *testing.T, o Options) *Host {
	t.Helper()
	st, err := OpenState(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	o.State = st
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestMediaCommandsNeedFFmpeg: without ffmpeg the media commands and caps
// are not declared, LeftOut says why and how to install it, and invoking
// one anyway is FFMPEG_NOT_FOUND; with it they are declared.
func TestMediaCommandsNeedFFmpeg(t *testing.T) {
	h := newTestHost(t, Options{FFmpeg: "atrium-test-no-ffmpeg"})
	if got := h.Commands(); !slices.Equal(got, Commands()) || !slices.Equal(h.Caps(), []string{CapSystem}) {
		t.Fatalf("without ffmpeg: commands %v caps %v", got, h.Caps())
	}
	left, why := h.LeftOut()
	if !slices.Equal(left, MediaCommands()) || !errors.Is(why, capture.ErrFFmpegNotFound) || !strings.Contains(why.Error(), "install") {
		t.Fatalf("left out %v: %v", left, why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, cmd := range MediaCommands() {
		_, err := h.cmd.Invoke(ctx, cmd, json.RawMessage(`{"transfer":{"id":"x"}}`))
		var ce *CommandError
		if !errors.As(err, &ce) || ce.Code != CodeFFmpegNotFound || !strings.Contains(ce.Message, "apt install ffmpeg") {
			t.Errorf("%s without ffmpeg: %v", cmd, err)
		}
	}

	h = newTestHost(t, Options{FFmpeg: scriptFFmpeg(t, testPNG(t, 4, 4))})
	if got := h.Commands(); !slices.Equal(got, append(Commands(), MediaCommands()...)) || !slices.Equal(h.Caps(), []string{CapSystem, CapCamera, CapScreen}) {
		t.Fatalf("with ffmpeg: commands %v caps %v", got, h.Caps())
	}
	if left, why := h.LeftOut(); left != nil || why != nil {
		t.Fatalf("with ffmpeg, left out %v %v", left, why)
	}
}

// TestMediaSnapshotSent: screen.snapshot captures into a temporary file,
// sends it on the gateway's transfer id (a cut send is resumed with the
// same id), answers the phone's payload fields and the media reference,
// and removes the file; a file over the transfer's maxSize is TOO_LARGE,
// a request without a transfer INVALID_REQUEST, no camera NO_CAMERA, and
// node.media.cancel stops a send as CANCELLED.
func TestMediaSnapshotSent(t *testing.T) {
	pic := testPNG(t, 48, 32)
	sum := sha256.Sum256(pic)
	tmp := t.TempDir()
	cpt := capture.New(capture.Options{FFmpeg: scriptFFmpeg(t, pic), GOOS: "linux", TempDir: tmp, DevDir: t.TempDir(),
		Getenv: func(k string) string { return map[string]string{"DISPLAY": ":99"}[k] }})
	type sendCall struct {
		file rtc.File
		data []byte
	}
	var calls []sendCall
	var tx transfers
	c := &Commander{Capture: cpt, transfers: &tx}
	c.Signal = func(context.Context, string) (string, error) { return "", errors.New("not used") }
	c.Send = func(ctx context.Context, f rtc.File, _ rtc.Signal) (rtc.Sent, error) {
		data, err := io.ReadAll(io.NewSectionReader(f.Data, 0, f.Size))
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, sendCall{f, data})
		if len(calls) == 1 {
			return rtc.Sent{}, io.ErrUnexpectedEOF // cut: resumed
		}
		s := sha256.Sum256(data)
		return rtc.Sent{SHA256: hex.EncodeToString(s[:])}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Invoke(ctx, CmdScreenSnapshot, json.RawMessage(`{"format":"png","screen":1,"transfer":{"id":"t-1","maxSize":1000000}}`))
	if err != nil {
		t.Fatal(err)
	}
	mr, ok := out.(*MediaResult)
	if !ok {
		t.Fatalf("result %T", out)
	}
	p := mr.Payload.(MediaPayload)
	if mr.Media != (MediaRef{ID: "t-1", Transport: "webrtc"}) || p.Width != 48 || p.Height != 32 || p.Size != int64(len(pic)) ||
		p.SHA256 != hex.EncodeToString(sum[:]) || p.MIME != "image/png" || p.Format != "png" || p.Device != ":99.1" {
		t.Fatalf("media %+v payload %+v", mr.Media, p)
	}
	if len(calls) != 2 || calls[0].file.ID != "t-1" || calls[1].file.ID != "t-1" || !bytes.Equal(calls[1].data, pic) ||
		calls[1].file.MIME != "image/png" || calls[1].file.Width != 48 || calls[1].file.Name != "screen.png" {
		t.Fatalf("sends %+v", calls)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("the capture left %v", left)
	}

	code := func(err error) string {
		var ce *CommandError
		if errors.As(err, &ce) {
			return ce.Code
		}
		return "not a CommandError: " + err.Error()
	}
	if _, err := c.Invoke(ctx, CmdScreenSnapshot, json.RawMessage(`{"transfer":{"id":"t-2","maxSize":10}}`)); code(err) != CodeTooLarge {
		t.Errorf("over maxSize: %v", err)
	}
	if _, err := c.Invoke(ctx, CmdScreenSnapshot, json.RawMessage(`{}`)); code(err) != CodeInvalidRequest {
		t.Errorf("without a transfer: %v", err)
	}
	if _, err := c.Invoke(ctx, CmdScreenSnapshot, json.RawMessage(`{"colour":"red","transfer":{"id":"t-3"}}`)); code(err) != CodeInvalidRequest {
		t.Errorf("an unknown param: %v", err)
	}
	if _, err := c.Invoke(ctx, CmdCameraSnap, json.RawMessage(`{"transfer":{"id":"t-4"}}`)); code(err) != CodeNoCamera {
		t.Errorf("no camera: %v", err)
	}
	if r, err := c.Invoke(ctx, CmdCameraList, nil); err != nil || len(r.(CameraListResult).Cameras) != 0 {
		t.Errorf("camera.list without cameras: %+v %v", r, err)
	}

	// node.media.cancel while the send waits.
	started := make(chan struct{})
	c.Send = func(ctx context.Context, f rtc.File, _ rtc.Signal) (rtc.Sent, error) {
		close(started)
		<-ctx.Done()
		return rtc.Sent{}, ctx.Err()
	}
	go func() {
		<-started
		if !tx.stop("t-5", "TIMEOUT") {
			t.Error("transfer t-5 was not running")
		}
	}()
	if _, err := c.Invoke(ctx, CmdScreenSnapshot, json.RawMessage(`{"transfer":{"id":"t-5"}}`)); code(err) != CodeCancelled {
		t.Errorf("cancelled by the gateway: %v", err)
	}
	if tx.stop("t-5", "X") {
		t.Error("a finished transfer is still listed")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("the captures left %v", left)
	}
}

// TestBindIPFor: the sender's ICE address is the one this computer reaches
// the gateway from (the routing table's answer, no packet sent).
func TestBindIPFor(t *testing.T) {
	if ip := bindIPFor("wss://127.0.0.2:18789/ws"); ip == nil || !ip.IsLoopback() {
		t.Errorf("for a loopback gateway: %v", ip)
	}
	if ip := bindIPFor("https://127.0.0.1/pair"); ip == nil || !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("for 127.0.0.1 without a port: %v", ip)
	}
	for _, u := range []string{"", "::not a url", "wss:///ws"} {
		if ip := bindIPFor(u); ip != nil {
			t.Errorf("bindIPFor(%q) = %v, want nil", u, ip)
		}
	}
}
