package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/capture/xvfbtest"
)

func intp(i int) *int { return &i }

// TestArgsGolden pins the argument lists of every system: only Linux runs
// here, so Windows' and macOS' lists are checked as text.
func TestArgsGolden(t *testing.T) {
	snap := SnapRequest{Facing: "front", MaxWidth: 1600, Quality: 0.85, DelayMs: 500}
	clip := ClipRequest{Facing: "back", DurationMs: 3000}
	shot := SnapshotRequest{Format: FormatPNG, MaxWidth: 3840}
	jpg := SnapshotRequest{Format: FormatJPEG, MaxWidth: 1280, Quality: 0.5}
	rec := RecordRequest{DurationMs: 2000, FPS: 10}
	linuxCam := Camera{ID: "/dev/video2", Label: "USB Camera"}
	winCam := Camera{ID: "Integrated Camera", Label: "Integrated Camera"}
	macCam := Camera{ID: "0", Label: "FaceTime HD Camera"}
	x := Screen{Display: ":0"}
	x1 := Screen{Display: "host:10.0", Index: 1, Chosen: true}
	s2 := Screen{Index: 2, Chosen: true}
	for _, c := range []struct {
		name string
		got  []string
		want string
	}{
		{"linux snap", SnapArgs("linux", linuxCam, snap, "/t/photo.jpg"),
			"-hide_banner -nostdin -y -f v4l2 -i /dev/video2 -ss 0.500 -frames:v 1 -update 1 -vf scale='min(1600,iw)':-2 -q:v 6 /t/photo.jpg"},
		{"linux clip", ClipArgs("linux", linuxCam, clip, true, "", "/t/clip.mp4"),
			"-hide_banner -nostdin -y -f v4l2 -i /dev/video2 -f pulse -i default -t 3.000 -vf scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -b:a 128k -movflags +faststart /t/clip.mp4"},
		{"linux clip silent", ClipArgs("linux", linuxCam, clip, false, "", "/t/clip.mp4"),
			"-hide_banner -nostdin -y -f v4l2 -i /dev/video2 -t 3.000 -vf scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart /t/clip.mp4"},
		{"linux snapshot", SnapshotArgs("linux", x, shot, "/t/screen.png"),
			"-hide_banner -nostdin -y -f x11grab -i :0 -frames:v 1 -update 1 -vf scale='min(3840,iw)':-2 /t/screen.png"},
		{"linux snapshot screen 1", SnapshotArgs("linux", x1, jpg, "/t/screen.jpg"),
			"-hide_banner -nostdin -y -f x11grab -i host:10.1 -frames:v 1 -update 1 -vf scale='min(1280,iw)':-2 -q:v 17 /t/screen.jpg"},
		{"linux record", RecordArgs("linux", x1, rec, "/t/screen.mp4"),
			"-hide_banner -nostdin -y -f x11grab -framerate 10 -i host:10.1 -t 2.000 -vf scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart /t/screen.mp4"},
		{"windows snap", SnapArgs("windows", winCam, SnapRequest{MaxWidth: 640, Quality: 1}, `C:\t\photo.jpg`),
			`-hide_banner -nostdin -y -f dshow -i video=Integrated Camera -frames:v 1 -update 1 -vf scale='min(640,iw)':-2 -q:v 2 C:\t\photo.jpg`},
		{"windows clip", ClipArgs("windows", winCam, clip, true, "Microphone (Realtek Audio)", `C:\t\clip.mp4`),
			`-hide_banner -nostdin -y -f dshow -i video=Integrated Camera:audio=Microphone (Realtek Audio) -t 3.000 -vf scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -b:a 128k -movflags +faststart C:\t\clip.mp4`},
		{"windows snapshot", SnapshotArgs("windows", Screen{}, shot, `C:\t\screen.png`),
			`-hide_banner -nostdin -y -f gdigrab -i desktop -frames:v 1 -update 1 -vf scale='min(3840,iw)':-2 C:\t\screen.png`},
		{"windows record screen 2", RecordArgs("windows", s2, rec, `C:\t\screen.mp4`),
			`-hide_banner -nostdin -y -f lavfi -i ddagrab=output_idx=2:framerate=10 -t 2.000 -vf hwdownload,format=bgra,scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart C:\t\screen.mp4`},
		{"windows record", RecordArgs("windows", Screen{}, rec, `C:\t\screen.mp4`),
			`-hide_banner -nostdin -y -f gdigrab -framerate 10 -i desktop -t 2.000 -vf scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart C:\t\screen.mp4`},
		{"darwin snap", SnapArgs("darwin", macCam, SnapRequest{MaxWidth: 1600, Quality: 0.85}, "/t/photo.jpg"),
			"-hide_banner -nostdin -y -f avfoundation -framerate 30 -i 0:none -frames:v 1 -update 1 -vf scale='min(1600,iw)':-2 -q:v 6 /t/photo.jpg"},
		{"darwin clip", ClipArgs("darwin", macCam, clip, true, "", "/t/clip.mp4"),
			"-hide_banner -nostdin -y -f avfoundation -framerate 30 -i 0:default -t 3.000 -vf scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -b:a 128k -movflags +faststart /t/clip.mp4"},
		{"darwin snapshot", SnapshotArgs("darwin", Screen{}, shot, "/t/screen.png"),
			"-hide_banner -nostdin -y -f avfoundation -capture_cursor 1 -i Capture screen 0:none -frames:v 1 -update 1 -vf scale='min(3840,iw)':-2 /t/screen.png"},
		{"darwin record screen 2", RecordArgs("darwin", s2, rec, "/t/screen.mp4"),
			"-hide_banner -nostdin -y -f avfoundation -capture_cursor 1 -framerate 10 -i Capture screen 2:none -t 2.000 -vf scale=trunc(iw/2)*2:trunc(ih/2)*2 -c:v libx264 -preset veryfast -pix_fmt yuv420p -an -movflags +faststart /t/screen.mp4"},
		{"windows list", ListDevicesArgs("windows"), "-hide_banner -nostdin -list_devices true -f dshow -i dummy"},
		{"darwin list", ListDevicesArgs("darwin"), "-hide_banner -nostdin -list_devices true -f avfoundation -i "},
	} {
		if got := strings.Join(c.got, " "); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	// Each argument is one argv entry: names with spaces are not split.
	if a := SnapArgs("windows", winCam, snap, "o.jpg"); a[6] != "video=Integrated Camera" {
		t.Errorf("the DirectShow source is %q", a[6])
	}
}

func TestParseDevices(t *testing.T) {
	newDshow := `[dshow @ 000001e5] "Integrated Camera" (video)
[dshow @ 000001e5]   Alternative name "@device_pnp_\\?\usb#vid_04f2"
[dshow @ 000001e5] "OBS Virtual Camera" (none)
[dshow @ 000001e5] "USB Cam" (video)
[dshow @ 000001e5] "Microphone (Realtek(R) Audio)" (audio)
dummy: Immediate exit requested`
	oldDshow := "[dshow @ 0x1] DirectShow video devices (some may be both video and audio devices)\r\n" +
		"[dshow @ 0x1]  \"Integrated Webcam\"\r\n[dshow @ 0x1]     Alternative name \"@device_pnp_x\"\r\n" +
		"[dshow @ 0x1] DirectShow audio devices\r\n[dshow @ 0x1]  \"Mic\"\r\n"
	avf := `[AVFoundation indev @ 0x7f8] AVFoundation video devices:
[AVFoundation indev @ 0x7f8] [0] FaceTime HD Camera
[AVFoundation indev @ 0x7f8] [1] Capture screen 0
[AVFoundation indev @ 0x7f8] [2] iPhone Camera
[AVFoundation indev @ 0x7f8] AVFoundation audio devices:
[AVFoundation indev @ 0x7f8] [0] MacBook Pro Microphone
: Input/output error`
	for _, c := range []struct {
		goos, in, cams, mics string
	}{
		{"windows", newDshow, "Integrated Camera=Integrated Camera/front USB Cam=USB Cam/back", "Microphone (Realtek(R) Audio)"},
		{"windows", oldDshow, "Integrated Webcam=Integrated Webcam/front", "Mic"},
		{"darwin", avf, "0=FaceTime HD Camera/front 2=iPhone Camera/back", "MacBook Pro Microphone"},
		{"windows", "", "", ""},
	} {
		cams, mics := ParseDevices(c.goos, c.in)
		var got []string
		for _, cm := range cams {
			got = append(got, cm.ID+"="+cm.Label+"/"+cm.Facing)
		}
		if strings.Join(got, " ") != c.cams || strings.Join(mics, ",") != c.mics {
			t.Errorf("%s: cameras %q mics %q, want %q and %q", c.goos, got, mics, c.cams, c.mics)
		}
	}
	cams := []Camera{{ID: "a"}, {ID: "b"}}
	if pickCamera(cams, "front").ID != "a" || pickCamera(cams, "back").ID != "b" || pickCamera(cams[:1], "back").ID != "a" {
		t.Error("facing does not follow the device order")
	}
}

// fakeFFmpeg is an executable that stands in for ffmpeg where none must
// run (it fails if it is run).
func fakeFFmpeg(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ffmpeg")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho fake ffmpeg ran >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestNoFFmpegNoCameraNoDisplay: each missing piece is its own clear
// error, before anything runs.
func TestNoFFmpegNoCameraNoDisplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	none := New(Options{FFmpeg: "atrium-no-such-ffmpeg", GOOS: "linux"})
	if err := none.Available(); !errors.Is(err, ErrFFmpegNotFound) || !strings.Contains(err.Error(), "apt install ffmpeg") {
		t.Fatalf("Available without ffmpeg: %v", err)
	}
	for _, f := range []func() (*Result, error){
		func() (*Result, error) { return none.Snap(ctx, SnapRequest{}) },
		func() (*Result, error) { return none.ScreenSnapshot(ctx, SnapshotRequest{}) },
		func() (*Result, error) { return none.ScreenRecord(ctx, RecordRequest{DurationMs: 1000}) },
		func() (*Result, error) { return none.Clip(ctx, ClipRequest{DurationMs: 1000}) },
	} {
		if r, err := f(); r != nil || !errors.Is(err, ErrFFmpegNotFound) {
			t.Errorf("a capture without ffmpeg: %v %v", r, err)
		}
	}
	if !strings.Contains(InstallHint("windows"), "winget") || !strings.Contains(InstallHint("darwin"), "brew install ffmpeg") {
		t.Error("install hints")
	}

	// /dev/video0 that is no V4L2 device, video1 unreadable: no camera.
	dev := t.TempDir()
	if err := os.WriteFile(filepath.Join(dev, "video0"), []byte("not a camera"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	c := New(Options{FFmpeg: fakeFFmpeg(t), GOOS: "linux", DevDir: dev, TempDir: tmp, Getenv: env(nil)})
	if cams, err := c.Cameras(ctx); err != nil || len(cams) != 0 {
		t.Fatalf("cameras %+v %v, want none", cams, err)
	}
	if _, err := c.Snap(ctx, SnapRequest{}); !errors.Is(err, ErrNoCamera) || !strings.Contains(err.Error(), dev+"/video*") {
		t.Fatalf("snap without a camera: %v", err)
	}
	if _, err := c.Clip(ctx, ClipRequest{}); !errors.Is(err, ErrNoCamera) {
		t.Fatalf("clip without a camera: %v", err)
	}
	if os.Geteuid() != 0 {
		if err := os.WriteFile(filepath.Join(dev, "video1"), nil, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Snap(ctx, SnapRequest{}); !errors.Is(err, ErrNoCamera) || !strings.Contains(err.Error(), "video group") {
			t.Fatalf("snap with an unreadable device: %v", err)
		}
	}

	// No display; Wayland without XWayland.
	if _, err := c.ScreenSnapshot(ctx, SnapshotRequest{}); !errors.Is(err, ErrNoDisplay) {
		t.Fatalf("snapshot without DISPLAY: %v", err)
	}
	w := New(Options{FFmpeg: fakeFFmpeg(t), GOOS: "linux", Getenv: env(map[string]string{"WAYLAND_DISPLAY": "wayland-0"})})
	if _, err := w.ScreenRecord(ctx, RecordRequest{DurationMs: 1000}); !errors.Is(err, ErrPortalUnsupported) || !strings.Contains(err.Error(), "portal") {
		t.Fatalf("record on Wayland: %v", err)
	}
	// A failing ffmpeg: its words in the error, nothing left behind.
	x := New(Options{FFmpeg: fakeFFmpeg(t), GOOS: "linux", TempDir: tmp, Getenv: env(map[string]string{"DISPLAY": ":99"})})
	if _, err := x.ScreenSnapshot(ctx, SnapshotRequest{}); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "fake ffmpeg ran") {
		t.Fatalf("a failing ffmpeg: %v", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("left behind in the temp dir: %v", left)
	}
}

func TestRequestBounds(t *testing.T) {
	c := New(Options{FFmpeg: fakeFFmpeg(t), GOOS: "linux", Getenv: env(map[string]string{"DISPLAY": ":99"})})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for name, f := range map[string]func() (*Result, error){
		"facing":        func() (*Result, error) { return c.Snap(ctx, SnapRequest{Facing: "left"}) },
		"maxWidth":      func() (*Result, error) { return c.Snap(ctx, SnapRequest{MaxWidth: 8}) },
		"quality":       func() (*Result, error) { return c.Snap(ctx, SnapRequest{Quality: 2}) },
		"delay":         func() (*Result, error) { return c.Snap(ctx, SnapRequest{DelayMs: 20_000}) },
		"clip long":     func() (*Result, error) { return c.Clip(ctx, ClipRequest{DurationMs: 61_000}) },
		"past deadline": func() (*Result, error) { return c.Clip(ctx, ClipRequest{DurationMs: 30_000}) },
		"format":        func() (*Result, error) { return c.ScreenSnapshot(ctx, SnapshotRequest{Format: "gif"}) },
		"screen":        func() (*Result, error) { return c.ScreenSnapshot(ctx, SnapshotRequest{Screen: intp(-1)}) },
		"fps":           func() (*Result, error) { return c.ScreenRecord(ctx, RecordRequest{DurationMs: 1000, FPS: 60}) },
	} {
		if _, err := f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestStderrBounded(t *testing.T) {
	b := newHeadTail(10)
	for range 100 {
		b.Write([]byte("0123456789"))
	}
	if s := b.String(); !strings.HasPrefix(s, "01234") || !strings.HasSuffix(s, "56789") || len(s) > 40 {
		t.Fatalf("kept %q", s)
	}
	if got := lastLines("a\nb\rframe=1 time=00:00:01.50\n\n", 2, 100); got != "b | frame=1 time=00:00:01.50" {
		t.Fatalf("lastLines %q", got)
	}
	stderr := "Input #0\n  Stream #0:0: Video: rawvideo, bgr0, 640x480, 25 fps\nOutput #0, mp4, to 'x.mp4':\n" +
		"  Stream #0:0: Video: h264 (avc1 / 0x31637661), yuv420p(tv, progressive), 640x480, q=2-31, 5 fps, 10240 tbn\n" +
		"frame=    9 fps=0.0 time=00:00:00.00\rframe=   10 fps=8.3 q=-1.0 Lsize=2kB time=00:00:01.40\n"
	if ms, ok := framesTime(stderr); !ok || ms != 2000 {
		t.Fatalf("framesTime %d %v", ms, ok)
	}
	if w, h := outputSize(stderr); w != 640 || h != 480 {
		t.Fatalf("outputSize %d×%d", w, h)
	}
}

// TestScreenUnderXvfb runs the real ffmpeg on a virtual display with two
// X screens: screen.snapshot of each has that screen's size, an absent
// screen is ErrNoScreen, screen.record writes an MP4 ffprobe accepts.
func TestScreenUnderXvfb(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed (Debian ffmpeg; `make deps` installs it)")
	}
	display := xvfbtest.Start(t, "640x480", "320x240")
	tmp := t.TempDir()
	c := New(Options{GOOS: "linux", TempDir: tmp, Getenv: env(map[string]string{"DISPLAY": display})})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, s := range []struct {
		screen *int
		format string
		w, h   int
	}{{nil, FormatPNG, 640, 480}, {intp(1), FormatPNG, 320, 240}, {intp(0), FormatJPEG, 640, 480}} {
		r, err := c.ScreenSnapshot(ctx, SnapshotRequest{Screen: s.screen, Format: s.format})
		if err != nil {
			t.Fatalf("snapshot of %v: %v", s.screen, err)
		}
		if r.Width != s.w || r.Height != s.h || r.Size == 0 || (s.format == FormatPNG) != (r.MIME == "image/png") {
			t.Errorf("snapshot of %v: %+v, want %d×%d", s.screen, r, s.w, s.h)
		}
		must(t, r.Remove())
	}
	if _, err := c.ScreenSnapshot(ctx, SnapshotRequest{Screen: intp(5)}); !errors.Is(err, ErrNoScreen) {
		t.Fatalf("snapshot of screen 5: %v, want ErrNoScreen", err)
	}
	r, err := c.ScreenRecord(ctx, RecordRequest{DurationMs: 1500, FPS: 5, Screen: intp(1)})
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	defer r.Remove()
	if r.Width != 320 || r.Height != 240 || r.MIME != "video/mp4" || r.DurationMs < 1300 || r.DurationMs > 1700 {
		t.Errorf("record: %+v", r)
	}
	if _, err := exec.LookPath("ffprobe"); err == nil {
		out, err := exec.CommandContext(ctx, "ffprobe", "-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", r.Path).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "h264,320,240" {
			t.Errorf("ffprobe: %q %v", out, err)
		}
	}
	must(t, r.Remove())
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCameraOneAtATime: captures of one camera wait for each other (a
// camera opens for one process at a time) instead of failing busy; one
// still waiting at its deadline is ErrCameraBusy.
func TestCameraOneAtATime(t *testing.T) {
	dir := t.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	var b bytes.Buffer
	must(t, jpeg.Encode(&b, img, nil))
	src, lock, overlap := filepath.Join(dir, "src.jpg"), filepath.Join(dir, "lock"), filepath.Join(dir, "overlap")
	must(t, os.WriteFile(src, b.Bytes(), 0o600))
	// A DirectShow "ffmpeg": lists one camera; a capture holds a lock
	// directory while it runs and notes any other capture running then.
	script := "#!/bin/sh\ncase \"$*\" in *-list_devices*) echo '[dshow @ 01] \"Cam A\" (video)' >&2; exit 1;; esac\n" +
		"for a in \"$@\"; do last=\"$a\"; done\n" +
		"mkdir '" + lock + "' 2>/dev/null || echo overlap >> '" + overlap + "'\n" +
		"sleep 0.2\ncp '" + src + "' \"$last\"\nrmdir '" + lock + "' 2>/dev/null\nexit 0\n"
	ff := filepath.Join(dir, "ffmpeg")
	must(t, os.WriteFile(ff, []byte(script), 0o700))
	c := New(Options{FFmpeg: ff, GOOS: "windows", TempDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			r, err := c.Snap(ctx, SnapRequest{})
			if err == nil && (r.Width != 8 || r.Device != "Cam A") {
				err = fmt.Errorf("snap %+v", r)
			}
			if r != nil {
				r.Remove()
			}
			errs <- err
		}()
	}
	for range 3 {
		must(t, <-errs)
	}
	if b, err := os.ReadFile(overlap); err == nil {
		t.Fatalf("captures of one camera overlapped: %s", b)
	}

	release, err := c.hold(ctx, "Cam A")
	must(t, err)
	defer release()
	gone, stop := context.WithCancel(ctx)
	stop() // the caller's deadline, reached while the camera is held
	if _, err := c.hold(gone, "Cam A"); !errors.Is(err, ErrCameraBusy) || !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting for a held camera past the deadline: %v, want ErrCameraBusy", err)
	}
	other, err := c.hold(gone, "Cam B") // another camera is free
	must(t, err)
	other()
}

// TestCameraThroughFFmpeg runs camera.snap and camera.clip through the
// real ffmpeg with its lavfi test sources standing for two cameras (no
// V4L2 camera here): facing picks by order, maxWidth scales down, the clip
// is H.264 MP4 of the asked length with AAC sound, and a microphone that
// fails gives the clip again without sound (Audio false).
func TestCameraThroughFFmpeg(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed (Debian ffmpeg; `make deps` installs it)")
	}
	tmp := t.TempDir()
	c := New(Options{GOOS: "linux", TempDir: tmp})
	c.testCameras = []Camera{{ID: "640x480", Label: "test front"}, {ID: "320x240", Label: "test back"}}
	mic := "sine=frequency=440"
	c.testInput = func(cam Camera, audio bool) []string {
		in := []string{"-f", "lavfi", "-i", "testsrc2=rate=10:size=" + cam.ID}
		if audio {
			in = append(in, "-f", "lavfi", "-i", mic)
		}
		return in
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if cams, err := c.Cameras(ctx); err != nil || len(cams) != 2 || cams[0].Facing != "front" || cams[1].Facing != "back" {
		t.Fatalf("cameras %+v %v", cams, err)
	}
	r, err := c.Snap(ctx, SnapRequest{MaxWidth: 200})
	must(t, err)
	if r.Device != "320x240" || r.Width != 200 || r.Height != 150 || r.MIME != "image/jpeg" {
		t.Errorf("back snap at most 200 wide: %+v", r)
	}
	must(t, r.Remove())
	r, err = c.Snap(ctx, SnapRequest{Facing: "front", DelayMs: 300, Quality: 0.5})
	must(t, err)
	if r.Device != "640x480" || r.Width != 640 || r.Height != 480 {
		t.Errorf("front snap: %+v", r)
	}
	must(t, r.Remove())

	probe := func(r *Result) string {
		t.Helper()
		if _, err := exec.LookPath("ffprobe"); err != nil {
			return ""
		}
		out, err := exec.CommandContext(ctx, "ffprobe", "-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", r.Path).CombinedOutput()
		if err != nil {
			t.Fatalf("ffprobe %s: %v %s", r.Path, err, out)
		}
		return strings.Join(strings.Fields(string(out)), ",")
	}
	for _, tc := range []struct {
		name    string
		mic     string
		include *bool
		audio   bool
		streams string
	}{
		{"with sound", "sine=frequency=440", nil, true, "h264,aac"},
		{"a failing microphone", "atrium-no-such-source", nil, false, "h264"},
		{"without sound", "sine=frequency=440", new(bool), false, "h264"},
	} {
		mic = tc.mic
		r, err := c.Clip(ctx, ClipRequest{Facing: "front", DurationMs: 1500, IncludeAudio: tc.include})
		if err != nil {
			t.Fatalf("clip %s: %v", tc.name, err)
		}
		if r.MIME != "video/mp4" || r.Width != 640 || r.Height != 480 || r.DurationMs != 1500 || r.Audio != tc.audio || r.Name != "clip.mp4" {
			t.Errorf("clip %s: %+v", tc.name, r)
		}
		if got := probe(r); got != "" && got != tc.streams {
			t.Errorf("clip %s: streams %s, want %s", tc.name, got, tc.streams)
		}
		must(t, r.Remove())
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
