package capture

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestLiveArgs(t *testing.T) {
	got := strings.Join(LiveArgs([]string{"-f", "x11grab", "-framerate", "5", "-i", ":9"}, nil, 5, 320), " ")
	want := "-hide_banner -loglevel error -nostdin -f x11grab -framerate 5 -i :9 -an -vf scale='min(320,iw)':-2,format=yuv420p,fps=5 " +
		"-c:v libvpx -deadline realtime -cpu-used 8 -b:v 1M -g 5 -auto-alt-ref 0 -f webm -live 1 -cluster_time_limit 250 -flush_packets 1 pipe:1"
	if got != want {
		t.Fatalf("LiveArgs:\n got %s\nwant %s", got, want)
	}
}

// TestLiveThroughFFmpeg: the live encoder with a lavfi source standing for
// a camera streams WebM until Stop, holds the camera meanwhile (another
// capture of it waits), and refuses bad requests.
func TestLiveThroughFFmpeg(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed (Debian ffmpeg; `make deps` installs it)")
	}
	c := New(Options{GOOS: "linux", TempDir: t.TempDir()})
	c.testCameras = []Camera{{ID: "320x240", Label: "test"}}
	c.testInput = func(cam Camera, audio bool) []string {
		return []string{"-re", "-f", "lavfi", "-i", "testsrc2=rate=10:size=" + cam.ID}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, bad := range []LiveRequest{{Source: "camera", FPS: 0, MaxWidth: 320}, {Source: "camera", FPS: 5, MaxWidth: 1}, {Source: "mic", FPS: 5, MaxWidth: 320}, {Source: "camera", Facing: "up", FPS: 5, MaxWidth: 320}} {
		if _, err := c.Live(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	l, err := c.Live(ctx, LiveRequest{Source: "camera", FPS: 10, MaxWidth: 160})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := io.CopyN(&got, l.Stdout, 4000); err != nil {
		t.Fatalf("the encoder's output: %v (%d bytes)", err, got.Len())
	}
	if !bytes.HasPrefix(got.Bytes(), []byte{0x1a, 0x45, 0xdf, 0xa3}) {
		t.Fatalf("not WebM: % x", got.Bytes()[:8])
	}
	// The camera is held: a snap waits until its deadline.
	short, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = c.Snap(short, SnapRequest{})
	scancel()
	if !errors.Is(err, ErrCameraBusy) {
		t.Fatalf("a snap during the live view: %v, want ErrCameraBusy", err)
	}
	go func() { _, _ = io.Copy(io.Discard, l.Stdout) }()
	if err := l.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Stop")
	}
	// Free again.
	r, err := c.Snap(ctx, SnapRequest{MaxWidth: 100})
	if err != nil {
		t.Fatalf("a snap after the live view: %v", err)
	}
	_ = r.Remove()
}
