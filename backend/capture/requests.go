package capture

import (
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of a photo
	_ "image/png"  // DecodeConfig of a screen snapshot
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Bounds and defaults of the requests; the same as the phone page's
// (frontend/src/lib/camera.ts, screen.ts) so that a caller sees one
// contract whichever node answers.
const (
	DefaultSnapWidth   = 1600
	DefaultScreenWidth = 3840
	DefaultQuality     = 0.85
	DefaultScreenJPEG  = 0.9
	DefaultClipMs      = 5000
	DefaultRecordMs    = 10_000
	DefaultFPS         = 10
	MinWidth           = 16
	MaxWidth           = 8192
	MaxDelayMs         = 10_000
	MinDurationMs      = 500
	MaxDurationMs      = 60_000
	MaxFPS             = 30
	MaxScreen          = 63
	// FinishMargin is how long a clip or recording needs after its duration
	// to end the file within the caller's deadline.
	FinishMargin = time.Second
)

// Picture formats of screen.snapshot.
const (
	FormatPNG  = "png"
	FormatJPEG = "jpeg"
)

// SnapRequest is camera.snap's params: facing "front" or "back" (default
// back, see the package doc), MaxWidth in pixels (default 1600), Quality
// JPEG 0.05…1 (default 0.85), DelayMs before the picture, 0…10000.
type SnapRequest struct {
	Facing   string  `json:"facing,omitempty"`
	MaxWidth int     `json:"maxWidth,omitempty"`
	Quality  float64 `json:"quality,omitempty"`
	DelayMs  int64   `json:"delayMs,omitempty"`
}

// ClipRequest is camera.clip's params: facing as SnapRequest's, DurationMs
// 500…60000 (default 5000), IncludeAudio (default true).
type ClipRequest struct {
	Facing       string `json:"facing,omitempty"`
	DurationMs   int64  `json:"durationMs,omitempty"`
	IncludeAudio *bool  `json:"includeAudio,omitempty"`
}

// SnapshotRequest is screen.snapshot's params: Format "png" (default) or
// "jpeg", MaxWidth (default 3840), Quality for JPEG (default 0.9), Screen
// (nil: the whole display, see the package doc).
type SnapshotRequest struct {
	Format   string  `json:"format,omitempty"`
	MaxWidth int     `json:"maxWidth,omitempty"`
	Quality  float64 `json:"quality,omitempty"`
	Screen   *int    `json:"screen,omitempty"`
}

// RecordRequest is screen.record's params: DurationMs 500…60000 (default
// 10000), FPS 1…30 (default 10), Screen as SnapshotRequest's.
type RecordRequest struct {
	DurationMs int64 `json:"durationMs,omitempty"`
	FPS        int   `json:"fps,omitempty"`
	Screen     *int  `json:"screen,omitempty"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func checkFacing(command, f string) (string, error) {
	switch f {
	case "":
		return "back", nil
	case "front", "back":
		return f, nil
	}
	return "", invalid("%s: facing must be \"front\" or \"back\"", command)
}

func checkWidth(command string, w, def int) (int, error) {
	if w == 0 {
		return def, nil
	}
	if w < MinWidth || w > MaxWidth {
		return 0, invalid("%s: maxWidth must be %d…%d", command, MinWidth, MaxWidth)
	}
	return w, nil
}

func checkQuality(command string, q float64) (float64, error) {
	if q == 0 {
		return DefaultQuality, nil
	}
	if q < 0.05 || q > 1 {
		return 0, invalid("%s: quality must be 0.05…1", command)
	}
	return q, nil
}

// checkDuration bounds a recording and checks that it ends (with
// FinishMargin) before ctx's deadline.
func checkDuration(ctx context.Context, command string, ms, def int64) (int64, error) {
	if ms == 0 {
		ms = def
	}
	if ms < MinDurationMs || ms > MaxDurationMs {
		return 0, invalid("%s: durationMs must be %d…%d", command, MinDurationMs, MaxDurationMs)
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); time.Duration(ms)*time.Millisecond+FinishMargin > left {
			return 0, invalid("%s: durationMs %d does not fit in the %d ms left of the invoke; give node.invoke a timeoutMs of at least durationMs + 10000",
				command, ms, left.Milliseconds())
		}
	}
	return ms, nil
}

func checkScreen(command string, s *int) error {
	if s != nil && (*s < 0 || *s > MaxScreen) {
		return invalid("%s: screen must be 0…%d", command, MaxScreen)
	}
	return nil
}

// camera finds the camera for facing; ErrNoCamera when there is none.
func (c *Capturer) camera(ctx context.Context, facing string) (Camera, found, error) {
	d, err := c.devices(ctx)
	if err != nil {
		return Camera{}, d, err
	}
	if len(d.cams) == 0 {
		return Camera{}, d, c.noCamera(d.note)
	}
	return pickCamera(d.cams, facing), d, nil
}

// Snap takes a photo (camera.snap): a JPEG at most p.MaxWidth wide. It
// waits while another capture of this Capturer uses the camera. Errors
// wrap ErrInvalid, ErrFFmpegNotFound, ErrNoCamera, ErrCameraBusy,
// ErrFailed, or ctx's.
func (c *Capturer) Snap(ctx context.Context, p SnapRequest) (*Result, error) {
	const command = "camera.snap"
	var err error
	if p.Facing, err = checkFacing(command, p.Facing); err != nil {
		return nil, err
	}
	if p.MaxWidth, err = checkWidth(command, p.MaxWidth, DefaultSnapWidth); err != nil {
		return nil, err
	}
	if p.Quality, err = checkQuality(command, p.Quality); err != nil {
		return nil, err
	}
	if p.DelayMs < 0 || p.DelayMs > MaxDelayMs {
		return nil, invalid("%s: delayMs must be 0…%d", command, MaxDelayMs)
	}
	if c.err != nil {
		return nil, c.err
	}
	cam, _, err := c.camera(ctx, p.Facing)
	if err != nil {
		return nil, err
	}
	release, err := c.hold(ctx, cam.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	return c.picture(ctx, "photo.jpg", "image/jpeg", cam.ID, func(out string) []string { return snapArgs(c.input(cam, false, ""), p, out) }, c.cameraFailed(cam))
}

// Clip records a clip (camera.clip): p.DurationMs of H.264 MP4, with sound
// when p.IncludeAudio and the microphone opens (else recorded again
// without it: Result.Audio false). Errors as Snap's.
func (c *Capturer) Clip(ctx context.Context, p ClipRequest) (*Result, error) {
	const command = "camera.clip"
	var err error
	if p.Facing, err = checkFacing(command, p.Facing); err != nil {
		return nil, err
	}
	if p.DurationMs, err = checkDuration(ctx, command, p.DurationMs, DefaultClipMs); err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	cam, d, err := c.camera(ctx, p.Facing)
	if err != nil {
		return nil, err
	}
	release, err := c.hold(ctx, cam.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	audio := p.IncludeAudio == nil || *p.IncludeAudio
	audioDev := ""
	if c.o.GOOS == "windows" {
		if len(d.mics) == 0 {
			audio = false
		} else {
			audioDev = d.mics[0]
		}
	}
	res, err := c.video(ctx, "clip.mp4", cam.ID, p.DurationMs, func(out string) []string {
		return clipArgs(c.input(cam, audio, audioDev), p, audio, out)
	}, c.cameraFailed(cam))
	if err != nil && audio && errors.Is(err, ErrFailed) && ctx.Err() == nil {
		// The microphone may be what failed (no PulseAudio, no access):
		// the picture without sound is better than nothing.
		audio = false
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Duration(p.DurationMs)*time.Millisecond+FinishMargin {
			res, err = c.video(ctx, "clip.mp4", cam.ID, p.DurationMs, func(out string) []string {
				return clipArgs(c.input(cam, false, ""), p, false, out)
			}, c.cameraFailed(cam))
		}
	}
	if res != nil {
		res.Audio = audio
	}
	return res, err
}

// cameraFailed maps a failed camera run: a device gone or busy.
func (c *Capturer) cameraFailed(cam Camera) func(error, string) error {
	return func(err error, stderr string) error {
		switch {
		case strings.Contains(stderr, "No such file or directory") && c.o.GOOS == "linux":
			return fmt.Errorf("%w: %s went away: %v", ErrNoCamera, cam.ID, err)
		case strings.Contains(stderr, "Device or resource busy"):
			return fmt.Errorf("%w: %s (%s) is in use by another program: %w", ErrCameraBusy, cam.Label, cam.ID, err)
		}
		return err
	}
}

// screen is the screen source for index (nil: the whole display), or
// ErrNoDisplay / ErrPortalUnsupported.
func (c *Capturer) screen(index *int) (Screen, error) {
	s := Screen{}
	if index != nil {
		s.Index, s.Chosen = *index, true
	}
	switch c.o.GOOS {
	case "windows", "darwin":
		return s, nil
	case "linux":
	default:
		return s, fmt.Errorf("%w: screen capture is not supported on %s", ErrNoDisplay, c.o.GOOS)
	}
	s.Display = c.o.Getenv("DISPLAY")
	if s.Display == "" {
		if c.o.Getenv("WAYLAND_DISPLAY") != "" {
			return s, fmt.Errorf("%w: this is a Wayland session without XWayland ($WAYLAND_DISPLAY is set, $DISPLAY is not); start the node inside an X session or with XWayland", ErrPortalUnsupported)
		}
		return s, fmt.Errorf("%w: $DISPLAY is not set (start the node inside the desktop session, or set DISPLAY=:0)", ErrNoDisplay)
	}
	return s, nil
}

// screenFailed maps a failed screen run: x11grab cannot open the display
// or the screen.
func (c *Capturer) screenFailed(s Screen) func(error, string) error {
	return func(err error, stderr string) error {
		if c.o.GOOS == "linux" && strings.Contains(stderr, "Cannot open display") {
			if s.Chosen {
				return fmt.Errorf("%w: display %s has no screen %d (X screens are :D.0, :D.1, …): %v", ErrNoScreen, displayBase(s.Display), s.Index, err)
			}
			return fmt.Errorf("%w: cannot open display %s: %v", ErrNoDisplay, s.Display, err)
		}
		if c.o.GOOS == "darwin" && s.Chosen && strings.Contains(stderr, "Capture screen") {
			return fmt.Errorf("%w: no %s: %v", ErrNoScreen, ScreenDevice(c.o.GOOS, s), err)
		}
		return err
	}
}

// ScreenSnapshot takes a picture of a screen (screen.snapshot): PNG or
// JPEG at most p.MaxWidth wide. Errors wrap ErrInvalid, ErrFFmpegNotFound,
// ErrNoDisplay, ErrPortalUnsupported, ErrNoScreen, ErrFailed, or ctx's.
func (c *Capturer) ScreenSnapshot(ctx context.Context, p SnapshotRequest) (*Result, error) {
	const command = "screen.snapshot"
	var err error
	switch p.Format {
	case "":
		p.Format = FormatPNG
	case FormatPNG, FormatJPEG:
	default:
		return nil, invalid("%s: format must be \"png\" or \"jpeg\"", command)
	}
	if p.MaxWidth, err = checkWidth(command, p.MaxWidth, DefaultScreenWidth); err != nil {
		return nil, err
	}
	if p.Quality == 0 {
		p.Quality = DefaultScreenJPEG
	}
	if p.Quality, err = checkQuality(command, p.Quality); err != nil {
		return nil, err
	}
	if err := checkScreen(command, p.Screen); err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	s, err := c.screen(p.Screen)
	if err != nil {
		return nil, err
	}
	name, mime := "screen.png", "image/png"
	if p.Format == FormatJPEG {
		name, mime = "screen.jpg", "image/jpeg"
	}
	return c.picture(ctx, name, mime, ScreenDevice(c.o.GOOS, s), func(out string) []string { return SnapshotArgs(c.o.GOOS, s, p, out) }, c.screenFailed(s))
}

// ScreenRecord records a screen (screen.record): p.DurationMs of H.264 MP4
// at p.FPS. Errors as ScreenSnapshot's.
func (c *Capturer) ScreenRecord(ctx context.Context, p RecordRequest) (*Result, error) {
	const command = "screen.record"
	var err error
	if p.DurationMs, err = checkDuration(ctx, command, p.DurationMs, DefaultRecordMs); err != nil {
		return nil, err
	}
	switch {
	case p.FPS == 0:
		p.FPS = DefaultFPS
	case p.FPS < 1 || p.FPS > MaxFPS:
		return nil, invalid("%s: fps must be 1…%d", command, MaxFPS)
	}
	if err := checkScreen(command, p.Screen); err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, c.err
	}
	s, err := c.screen(p.Screen)
	if err != nil {
		return nil, err
	}
	return c.video(ctx, "screen.mp4", ScreenDevice(c.o.GOOS, s), p.DurationMs, func(out string) []string {
		return RecordArgs(c.o.GOOS, s, p, out)
	}, c.screenFailed(s))
}

// capture runs args(out) into a fresh temporary folder and returns the
// file; mapFail turns a failed run into a more precise error. The folder
// is removed on any error.
func (c *Capturer) capture(ctx context.Context, name, mime, device string, args func(out string) []string,
	mapFail func(error, string) error) (*Result, string, error) {
	dir, err := c.tempDir()
	if err != nil {
		return nil, "", err
	}
	r := &Result{Path: filepath.Join(dir, name), Name: name, MIME: mime, Device: device, dir: dir}
	stderr, err := c.run(ctx, args(r.Path))
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(r.Path); err == nil && st.Size() == 0 {
			err = fmt.Errorf("%w: ffmpeg wrote an empty file: %s", ErrFailed, lastLines(stderr, 3, 600))
		} else if err == nil {
			r.Size = st.Size()
		} else {
			err = fmt.Errorf("%w: ffmpeg wrote no file: %s", ErrFailed, lastLines(stderr, 3, 600))
		}
	} else if errors.Is(err, ErrFailed) {
		err = mapFail(err, stderr)
	}
	if err != nil {
		_ = r.Remove()
		return nil, stderr, err
	}
	return r, stderr, nil
}

// picture captures one picture and reads its size from the file's header.
func (c *Capturer) picture(ctx context.Context, name, mime, device string, args func(string) []string, mapFail func(error, string) error) (*Result, error) {
	r, _, err := c.capture(ctx, name, mime, device, args, mapFail)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(r.Path)
	if err == nil {
		var cfg image.Config
		cfg, _, err = image.DecodeConfig(f)
		f.Close()
		r.Width, r.Height = cfg.Width, cfg.Height
	}
	if err != nil {
		_ = r.Remove()
		return nil, fmt.Errorf("%w: the picture does not decode: %v", ErrFailed, err)
	}
	return r, nil
}

// video captures a clip or recording of ms milliseconds; its size and
// length are what ffmpeg reported.
func (c *Capturer) video(ctx context.Context, name, device string, ms int64, args func(string) []string, mapFail func(error, string) error) (*Result, error) {
	r, stderr, err := c.capture(ctx, name, "video/mp4", device, args, mapFail)
	if err != nil {
		return nil, err
	}
	r.Width, r.Height = outputSize(stderr)
	r.DurationMs = ms
	if d, ok := framesTime(stderr); ok {
		r.DurationMs = d
	}
	return r, nil
}

var (
	streamSize = regexp.MustCompile(`Stream #\d+:\d+.*: Video: .*?, (\d{2,5})x(\d{2,5})[ ,\[]`)
	streamFPS  = regexp.MustCompile(`Stream #\d+:\d+.*: Video: .*?, (\d+(?:\.\d+)?) fps`)
	frames     = regexp.MustCompile(`frame=\s*(\d+)`)
)

// framesTime is a recording's length in milliseconds: the frames ffmpeg
// last reported written over the output stream's frame rate (ffmpeg's own
// time= lags behind by the encoder's delay).
func framesTime(stderr string) (int64, bool) {
	_, after, ok := strings.Cut(stderr, "Output #0")
	if !ok {
		return 0, false
	}
	fm := streamFPS.FindStringSubmatch(after)
	all := frames.FindAllStringSubmatch(after, -1)
	if fm == nil || len(all) == 0 {
		return 0, false
	}
	fps, err := strconv.ParseFloat(fm[1], 64)
	n, _ := strconv.ParseInt(all[len(all)-1][1], 10, 64)
	if err != nil || fps <= 0 || n <= 0 {
		return 0, false
	}
	return int64(float64(n) * 1000 / fps), true
}

// outputSize is the WxH of the first video stream after "Output #0" in
// ffmpeg's stderr (0, 0 when not found).
func outputSize(stderr string) (int, int) {
	_, after, ok := strings.Cut(stderr, "Output #0")
	if !ok {
		return 0, 0
	}
	m := streamSize.FindStringSubmatch(after)
	if m == nil {
		return 0, 0
	}
	w, _ := strconv.Atoi(m[1])
	h, _ := strconv.Atoi(m[2])
	return w, h
}
