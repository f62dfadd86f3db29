// Package capture is ffmpeg-based capture for `atrium node` (issue 22, SPEC
// §7): a photo or a clip from a camera, a snapshot or a recording of a
// screen, each written by an ffmpeg process into a temporary file that the
// caller sends (nodehost, over rtc.Sender) and then removes (Result.Remove).
//
// Where the pictures come from, per operating system (args.go builds the
// argument lists; only Linux runs here, the others are golden-tested):
//
//   - Linux: cameras are the V4L2 capture devices /dev/video* (those whose
//     VIDIOC_QUERYCAP says video capture; UVC's metadata nodes are left
//     out), in the order of their number; audio of a clip from PulseAudio
//     (pulse "default"). Screens through x11grab from $DISPLAY. A Wayland
//     session without XWayland ($WAYLAND_DISPLAY set, $DISPLAY empty) is
//     ErrPortalUnsupported: capture through the desktop portal
//     (xdg-desktop-portal ScreenCast) is not supported yet.
//   - Windows: cameras are the DirectShow video devices (ffmpeg -list_devices),
//     audio the first DirectShow audio device; the screen through gdigrab
//     ("desktop", every monitor), a chosen screen N through ddagrab's
//     output_idx=N (ffmpeg ≥ 6).
//   - macOS: cameras are the AVFoundation video devices that are not
//     "Capture screen N"; audio the default input; screen N is AVFoundation's
//     "Capture screen N".
//
// Facing: a computer's cameras say nothing of where they look, so facing
// maps to device order: "front" is the first camera, "back" the second
// when there is one, else the first (as a browser's ideal facingMode falls
// back to the camera there is).
//
// Screens (screen.snapshot/screen.record {screen: N}): on Linux screen N is
// the X screen N of $DISPLAY (":0" → ":0.N"); monitors that the X server
// joins into one screen (RandR, Xinerama, the usual desktop) are captured
// together as that one screen. Without screen the display as $DISPLAY
// names it. A screen that does not exist is ErrNoScreen. The size of a
// snapshot is the file's own (its PNG or JPEG header); the size of a clip
// is what ffmpeg reports for its output stream.
//
// Files: photos and screen snapshots are JPEG (or PNG), clips and
// recordings H.264 in MP4 (libx264, yuv420p, even dimensions, faststart so
// a player can seek), with AAC audio when asked for and available (a clip
// whose audio device fails is recorded again without audio, Result.Audio
// false).
//
// A camera opens for one process at a time: captures of one Capturer on
// the same camera wait for each other (until their deadline:
// ErrCameraBusy); a camera another program holds is ErrCameraBusy at once.
// Screens are captured in parallel.
//
// On a Wayland desktop with XWayland ($DISPLAY set), x11grab sees the X11
// windows only: Wayland-native windows come out black. Start the node in
// an X session for full pictures until the portal is supported.
//
// Every run is bounded: by the caller's context (the invoke's deadline;
// ffmpeg is killed when it ends, and waited for at most 5 s more), and its
// stderr is kept to a head and a tail of MaxStderr/2 bytes each, of which
// only the last lines reach an error message.
package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Sentinel errors; the methods wrap them with what happened.
var (
	// ErrFFmpegNotFound: no ffmpeg executable (Options.FFmpeg, else
	// "ffmpeg" in PATH). InstallHint says how to install it.
	ErrFFmpegNotFound = errors.New("ffmpeg not found")
	// ErrNoCamera: the computer has no camera ffmpeg can open.
	ErrNoCamera = errors.New("no camera")
	// ErrNoDisplay: no display to capture ($DISPLAY empty on Linux).
	ErrNoDisplay = errors.New("no display to capture")
	// ErrPortalUnsupported: a Wayland session without XWayland; the desktop
	// portal's screen capture is not supported yet.
	ErrPortalUnsupported = errors.New("Wayland screen capture through the desktop portal (xdg-desktop-portal) is not supported yet")
	// ErrNoScreen: the screen asked for does not exist.
	ErrNoScreen = errors.New("no such screen")
	// ErrInvalid: a request out of its bounds.
	ErrInvalid = errors.New("invalid capture request")
	// ErrFailed: ffmpeg ran and failed; the error says the last lines it
	// wrote.
	ErrFailed = errors.New("ffmpeg capture failed")
)

// InstallHint is how to install ffmpeg on goos, for ErrFFmpegNotFound's
// messages.
func InstallHint(goos string) string {
	switch goos {
	case "windows":
		return "install it (winget install Gyan.FFmpeg, or from https://ffmpeg.org/download.html) and put ffmpeg.exe in PATH"
	case "darwin":
		return "install it (brew install ffmpeg) and make sure it is in PATH"
	}
	return "install it with the system's package manager (e.g. sudo apt install ffmpeg, sudo dnf install ffmpeg) and make sure it is in PATH"
}

// Options configure a Capturer. Zero values take the documented defaults.
type Options struct {
	// FFmpeg is the ffmpeg executable: a path, or a name looked up in PATH
	// with exec.LookPath (default "ffmpeg").
	FFmpeg string
	// GOOS selects the capture devices and argument lists (default
	// runtime.GOOS; tests build other systems' lists).
	GOOS string
	// Getenv reads DISPLAY and WAYLAND_DISPLAY (default os.Getenv).
	Getenv func(string) string
	// DevDir is where Linux looks for /dev/video* (default "/dev").
	DevDir string
	// TempDir holds the temporary folder of each capture (default
	// os.TempDir()).
	TempDir string
	// MaxStderr bounds how much of ffmpeg's stderr is kept per run, in
	// bytes: its first and its last MaxStderr/2 (default 64 KiB).
	MaxStderr int
	// WaitDelay bounds the wait for ffmpeg's exit after its context ended
	// (default 5 s).
	WaitDelay time.Duration
}

// Capturer runs ffmpeg captures. Create with New; safe for concurrent use
// (each capture is its own process and temporary folder).
type Capturer struct {
	o      Options
	ffmpeg string // resolved path, "" when not found
	err    error  // why ffmpeg is not usable

	mu   sync.Mutex
	busy map[string]chan struct{} // a camera in use, by Camera.ID: closed when it is free again

	// testCameras and testInput, set by tests, stand for the system's
	// camera list and cameraInput (ffmpeg's lavfi test sources stand for a
	// camera where there is none).
	testCameras []Camera
	testInput   func(cam Camera, audio bool) []string
}

// input is camera cam's input arguments (audio: with the microphone;
// audioDev its DirectShow name).
func (c *Capturer) input(cam Camera, audio bool, audioDev string) []string {
	if c.testInput != nil {
		return c.testInput(cam, audio)
	}
	return cameraInput(c.o.GOOS, cam, audio, audioDev)
}

// ErrCameraBusy: the camera stayed in use by another capture of this node
// until the caller's deadline.
var ErrCameraBusy = errors.New("camera busy")

// hold waits until no other capture of this Capturer uses camera id (a
// camera opens for one process at a time), or ctx ends (ErrCameraBusy
// wrapping ctx's error); release frees it.
func (c *Capturer) hold(ctx context.Context, id string) (release func(), err error) {
	for {
		c.mu.Lock()
		if c.busy == nil {
			c.busy = map[string]chan struct{}{}
		}
		wait, taken := c.busy[id]
		if !taken {
			done := make(chan struct{})
			c.busy[id] = done
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				delete(c.busy, id)
				c.mu.Unlock()
				close(done)
			}, nil
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s is in use by another capture of this node: %w", ErrCameraBusy, id, context.Cause(ctx))
		}
	}
}

// New applies o's defaults and looks ffmpeg up. A missing ffmpeg is not an
// error here: Available reports it and every capture returns it.
func New(o Options) *Capturer {
	if o.FFmpeg == "" {
		o.FFmpeg = "ffmpeg"
	}
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.DevDir == "" {
		o.DevDir = "/dev"
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.MaxStderr <= 0 {
		o.MaxStderr = 64 << 10
	}
	if o.WaitDelay <= 0 {
		o.WaitDelay = 5 * time.Second
	}
	c := &Capturer{o: o}
	path, err := exec.LookPath(o.FFmpeg)
	if err != nil {
		c.err = fmt.Errorf("%w (%q: %v); %s", ErrFFmpegNotFound, o.FFmpeg, err, InstallHint(o.GOOS))
	} else {
		c.ffmpeg = path
	}
	return c
}

// Available is nil when ffmpeg was found, else an error wrapping
// ErrFFmpegNotFound that says how to install it.
func (c *Capturer) Available() error { return c.err }

// FFmpeg is the path of the ffmpeg executable in use ("" when not found).
func (c *Capturer) FFmpeg() string { return c.ffmpeg }

// Result is one captured file. The caller sends it and then calls Remove.
type Result struct {
	// Path is the file, inside a temporary folder of its own.
	Path string
	// Name is the file's name as it is sent ("photo.jpg", "clip.mp4", …).
	Name string
	Size int64
	MIME string
	// Width and Height in pixels (0 when unknown).
	Width, Height int
	// DurationMs of a clip or recording, as ffmpeg wrote it (else the
	// duration asked for); 0 for pictures.
	DurationMs int64
	// Audio: a clip holds sound.
	Audio bool
	// Device is the camera's id (Linux: its /dev path) or the screen's
	// source (":0.1", "desktop", "Capture screen 0").
	Device string
	dir    string
}

// Remove deletes the file and its temporary folder.
func (r *Result) Remove() error {
	if r == nil || r.dir == "" {
		return nil
	}
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("capture: remove %s: %w", r.dir, err)
	}
	return nil
}

// tempDir makes a capture's temporary folder.
func (c *Capturer) tempDir() (string, error) {
	d, err := os.MkdirTemp(c.o.TempDir, "atrium-capture-*")
	if err != nil {
		return "", fmt.Errorf("capture: temporary folder: %w", err)
	}
	return d, nil
}

// run runs ffmpeg with args until it exits or ctx ends; the error wraps
// ErrFailed (with ffmpeg's last lines) or ctx's error. It returns the kept
// stderr either way.
func (c *Capturer) run(ctx context.Context, args []string) (string, error) {
	if c.err != nil {
		return "", c.err
	}
	cmd := exec.CommandContext(ctx, c.ffmpeg, args...)
	buf := newHeadTail(c.o.MaxStderr)
	cmd.Stderr = buf
	cmd.WaitDelay = c.o.WaitDelay
	err := cmd.Run()
	out := buf.String()
	if err == nil {
		return out, nil
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("capture: ffmpeg stopped: %w", context.Cause(ctx))
	}
	return out, fmt.Errorf("%w: %v: %s", ErrFailed, err, lastLines(out, 3, 600))
}

// headTail keeps the first and the last max/2 bytes written to it.
type headTail struct {
	half    int
	head    []byte
	tail    []byte
	dropped int64
}

func newHeadTail(maxBytes int) *headTail { return &headTail{half: max(maxBytes/2, 1)} }

func (b *headTail) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.half - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.tail = append(b.tail, p...)
	if over := len(b.tail) - b.half; over > 0 {
		b.dropped += int64(over)
		b.tail = append(b.tail[:0], b.tail[over:]...)
	}
	return n, nil
}

func (b *headTail) String() string {
	if b.dropped == 0 {
		return string(b.head) + string(b.tail)
	}
	return string(b.head) + fmt.Sprintf("\n[… %d bytes …]\n", b.dropped) + string(b.tail)
}

// lastLines is the last n non-empty lines of s (progress lines split at
// \r too), joined by " | " and cut to at most maxLen bytes.
func lastLines(s string, n, maxLen int) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	out := strings.Join(keep, " | ")
	if len(out) > maxLen {
		out = "…" + out[len(out)-maxLen:]
	}
	if out == "" {
		return "no output"
	}
	return out
}
