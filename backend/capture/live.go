package capture

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// LiveRequest is a live view's capture (camera.live, screen.live; package
// live): Source "camera" (Facing as camera.snap's) or "screen" (Screen as
// screen.record's), FPS 1…MaxFPS, MaxWidth MinWidth…MaxWidth.
type LiveRequest struct {
	Source   string
	Facing   string
	Screen   *int
	FPS      int
	MaxWidth int
}

// Live encoder settings: VP8 at LiveBitrate, a keyframe every second, a
// WebM cluster at least every LiveClusterMs (ffmpeg's muxer holds a
// cluster until it ends: this bounds what it adds to the latency).
const (
	LiveBitrate   = "1M"
	LiveClusterMs = 250
	LiveMIME      = "video/webm;codecs=vp8"
)

// LiveArgs is ffmpeg's argument list of a live view from input (a camera
// or screen input, with its filters first): VP8 without sound in live
// WebM on stdout.
func LiveArgs(input, filters []string, fps, maxWidth int) []string {
	vf := append(append([]string{}, filters...), scaleDown(maxWidth), "format=yuv420p")
	args := append([]string{"-hide_banner", "-loglevel", "error", "-nostdin"}, input...)
	vf = append(vf, "fps="+strconv.Itoa(fps))
	return append(args, "-an", "-vf", joinFilters(vf),
		"-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", LiveBitrate,
		"-g", strconv.Itoa(fps), "-auto-alt-ref", "0",
		"-f", "webm", "-live", "1", "-cluster_time_limit", strconv.Itoa(LiveClusterMs), "-flush_packets", "1", "pipe:1")
}

func joinFilters(f []string) string { return strings.Join(f, ",") }

// LiveCapture is a running live encoder: its WebM on Stdout until Stop or
// its context ends.
type LiveCapture struct {
	Stdout io.Reader
	// Device is what it captures (a camera's id, a screen's device).
	Device string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stderr *headTail
	done   chan struct{}
	err    error
}

// Live starts a live encoder (camera.live, screen.live) that runs until
// ctx ends or Stop. A camera is held for it (ErrCameraBusy while another
// capture of this Capturer uses it). Errors wrap ErrInvalid,
// ErrFFmpegNotFound, ErrNoCamera, ErrNoScreen, ErrCameraBusy, or the
// start's.
func (c *Capturer) Live(ctx context.Context, p LiveRequest) (*LiveCapture, error) {
	command := p.Source + ".live"
	switch {
	case p.FPS < 1 || p.FPS > MaxFPS:
		return nil, invalid("%s: fps must be 1…%d", command, MaxFPS)
	case p.MaxWidth < MinWidth || p.MaxWidth > MaxWidth:
		return nil, invalid("%s: maxWidth must be %d…%d", command, MinWidth, MaxWidth)
	}
	if c.err != nil {
		return nil, c.err
	}
	var input, filters []string
	device := ""
	release := func() {}
	switch p.Source {
	case "camera":
		facing, err := checkFacing(command, p.Facing)
		if err != nil {
			return nil, err
		}
		cam, _, err := c.camera(ctx, facing)
		if err != nil {
			return nil, err
		}
		if release, err = c.hold(ctx, cam.ID); err != nil {
			return nil, err
		}
		input, device = c.input(cam, false, ""), cam.ID
	case "screen":
		if err := checkScreen(command, p.Screen); err != nil {
			return nil, err
		}
		s, err := c.screen(p.Screen)
		if err != nil {
			return nil, err
		}
		input, filters = screenInput(c.o.GOOS, s, p.FPS)
		device = ScreenDevice(c.o.GOOS, s)
	default:
		return nil, invalid("live: source must be camera or screen")
	}
	rctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(rctx, c.ffmpeg, LiveArgs(input, filters, p.FPS, p.MaxWidth)...)
	cmd.WaitDelay = c.o.WaitDelay
	l := &LiveCapture{Device: device, cmd: cmd, cancel: cancel, stderr: newHeadTail(c.o.MaxStderr), done: make(chan struct{})}
	cmd.Stderr = l.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		release()
		return nil, fmt.Errorf("capture: live: %w", err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		release()
		return nil, fmt.Errorf("%w: start ffmpeg: %v", ErrFailed, err)
	}
	l.Stdout = out
	go func() {
		err := cmd.Wait()
		if err != nil && rctx.Err() == nil {
			l.err = fmt.Errorf("%w: %v: %s", ErrFailed, err, lastLines(l.stderr.String(), 3, 600))
		}
		release()
		close(l.done)
	}()
	return l, nil
}

// Stop ends the encoder and waits (bounded by Options.WaitDelay) for its
// exit; the error is ffmpeg's own failure before Stop, if any.
func (l *LiveCapture) Stop() error {
	l.cancel()
	<-l.done
	return l.err
}

// Done is closed when ffmpeg has exited.
func (l *LiveCapture) Done() <-chan struct{} { return l.done }
