package capture

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Camera is one camera ffmpeg can open.
type Camera struct {
	// ID opens it: Linux its device path (/dev/video0), Windows its
	// DirectShow name, macOS its AVFoundation index ("0").
	ID string `json:"id"`
	// Label is the name the device gives itself.
	Label string `json:"label"`
	// Facing is what the device order maps it to: "front" (the first),
	// "back" (the second); empty for the others.
	Facing string `json:"facing,omitempty"`
}

// Screen is a screen source: the X display ("host:D", Linux) and the
// screen index, Chosen when the caller asked for one.
type Screen struct {
	Display string
	Index   int
	Chosen  bool
}

// common are the arguments every run starts with: no banner, no stdin
// (ffmpeg would read keys from it), overwrite the (fresh) output.
var common = []string{"-hide_banner", "-nostdin", "-y"}

// cameraInput is the input of camera cam on goos; audio adds the system's
// default microphone (audioDev: the DirectShow audio device on Windows).
func cameraInput(goos string, cam Camera, audio bool, audioDev string) []string {
	switch goos {
	case "windows":
		src := "video=" + cam.ID
		if audio && audioDev != "" {
			src += ":audio=" + audioDev
		}
		return []string{"-f", "dshow", "-i", src}
	case "darwin":
		a := "none"
		if audio {
			a = "default"
		}
		return []string{"-f", "avfoundation", "-framerate", "30", "-i", cam.ID + ":" + a}
	}
	in := []string{"-f", "v4l2", "-i", cam.ID}
	if audio {
		in = append(in, "-f", "pulse", "-i", "default")
	}
	return in
}

// screenInput is the input of screen s on goos at fps frames per second
// (0: one picture, the grabber's default rate), and the filters the
// source needs before any other (ddagrab's frames live on the GPU).
func screenInput(goos string, s Screen, fps int) (in, filters []string) {
	rate := func() []string {
		if fps > 0 {
			return []string{"-framerate", strconv.Itoa(fps)}
		}
		return nil
	}
	switch goos {
	case "windows":
		if s.Chosen {
			src := fmt.Sprintf("ddagrab=output_idx=%d", s.Index)
			if fps > 0 {
				src += fmt.Sprintf(":framerate=%d", fps)
			}
			return []string{"-f", "lavfi", "-i", src}, []string{"hwdownload", "format=bgra"}
		}
		return append(append([]string{"-f", "gdigrab"}, rate()...), "-i", "desktop"), nil
	case "darwin":
		return append(append([]string{"-f", "avfoundation", "-capture_cursor", "1"}, rate()...), "-i", ScreenDevice(goos, s)+":none"), nil
	}
	return append(append([]string{"-f", "x11grab"}, rate()...), "-i", ScreenDevice(goos, s)), nil
}

// ScreenDevice names screen s as goos's grabber opens it: Linux the X
// display with the screen (":0.1"), Windows "desktop" or
// "ddagrab output N", macOS "Capture screen N".
func ScreenDevice(goos string, s Screen) string {
	switch goos {
	case "windows":
		if s.Chosen {
			return fmt.Sprintf("ddagrab output %d", s.Index)
		}
		return "desktop"
	case "darwin":
		return fmt.Sprintf("Capture screen %d", s.Index)
	}
	if !s.Chosen {
		return s.Display
	}
	return fmt.Sprintf("%s.%d", displayBase(s.Display), s.Index)
}

// displayBase is an X display name without its screen: "host:0.1" → "host:0".
func displayBase(d string) string {
	colon := strings.LastIndexByte(d, ':')
	if colon < 0 {
		return d
	}
	if dot := strings.IndexByte(d[colon:], '.'); dot >= 0 {
		return d[:colon+dot]
	}
	return d
}

// qscale maps a JPEG quality 0…1 (the browser's canvas.toBlob scale) to
// ffmpeg's mjpeg -q:v 2 (best) … 31.
func qscale(quality float64) int {
	q := int(math.Round(2 + (1-quality)*29))
	return min(max(q, 2), 31)
}

// scaleDown keeps a picture at most maxWidth wide (never enlarged), height
// in proportion and even.
func scaleDown(maxWidth int) string {
	return fmt.Sprintf("scale='min(%d,iw)':-2", maxWidth)
}

// even makes a video's dimensions even (H.264 in yuv420p needs it).
const even = "scale=trunc(iw/2)*2:trunc(ih/2)*2"

// seconds formats d milliseconds for ffmpeg's -t and -ss.
func seconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

// pictureOutput encodes one frame to out (JPEG at quality, or PNG).
func pictureOutput(filters []string, maxWidth int, png bool, quality float64, out string) []string {
	f := append(append([]string(nil), filters...), scaleDown(maxWidth))
	args := []string{"-frames:v", "1", "-update", "1", "-vf", strings.Join(f, ",")}
	if !png {
		args = append(args, "-q:v", strconv.Itoa(qscale(quality)))
	}
	return append(args, out)
}

// videoOutput encodes ms milliseconds as H.264 MP4 (AAC audio when audio).
func videoOutput(filters []string, ms int64, audio bool, out string) []string {
	f := append(append([]string(nil), filters...), even)
	args := []string{"-t", seconds(ms), "-vf", strings.Join(f, ","), "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p"}
	if audio {
		args = append(args, "-c:a", "aac", "-b:a", "128k")
	} else {
		args = append(args, "-an")
	}
	return append(args, "-movflags", "+faststart", out)
}

// SnapArgs is ffmpeg's argument list for camera.snap on goos: one frame of
// cam after p.DelayMs, at most p.MaxWidth wide, JPEG at p.Quality, to out.
func SnapArgs(goos string, cam Camera, p SnapRequest, out string) []string {
	return snapArgs(cameraInput(goos, cam, false, ""), p, out)
}

func snapArgs(input []string, p SnapRequest, out string) []string {
	args := append(append([]string(nil), common...), input...)
	if p.DelayMs > 0 {
		args = append(args, "-ss", seconds(p.DelayMs))
	}
	return append(args, pictureOutput(nil, p.MaxWidth, false, p.Quality, out)...)
}

// ClipArgs is ffmpeg's argument list for camera.clip on goos: p.DurationMs
// of cam (and the microphone when audio; audioDev names it on Windows) as
// MP4 to out.
func ClipArgs(goos string, cam Camera, p ClipRequest, audio bool, audioDev string, out string) []string {
	return clipArgs(cameraInput(goos, cam, audio, audioDev), p, audio, out)
}

func clipArgs(input []string, p ClipRequest, audio bool, out string) []string {
	args := append(append([]string(nil), common...), input...)
	return append(args, videoOutput(nil, p.DurationMs, audio, out)...)
}

// SnapshotArgs is ffmpeg's argument list for screen.snapshot on goos: one
// frame of s, at most p.MaxWidth wide, PNG or JPEG (p.Format) to out.
func SnapshotArgs(goos string, s Screen, p SnapshotRequest, out string) []string {
	in, filters := screenInput(goos, s, 0)
	args := append(append([]string(nil), common...), in...)
	return append(args, pictureOutput(filters, p.MaxWidth, p.Format == FormatPNG, p.Quality, out)...)
}

// RecordArgs is ffmpeg's argument list for screen.record on goos:
// p.DurationMs of s at p.FPS as MP4 to out.
func RecordArgs(goos string, s Screen, p RecordRequest, out string) []string {
	in, filters := screenInput(goos, s, p.FPS)
	args := append(append([]string(nil), common...), in...)
	return append(args, videoOutput(filters, p.DurationMs, false, out)...)
}

// ListDevicesArgs is ffmpeg's argument list that prints goos's capture
// devices on stderr (Windows DirectShow, macOS AVFoundation; nil on Linux,
// which reads /dev/video* itself).
func ListDevicesArgs(goos string) []string {
	switch goos {
	case "windows":
		return []string{"-hide_banner", "-nostdin", "-list_devices", "true", "-f", "dshow", "-i", "dummy"}
	case "darwin":
		return []string{"-hide_banner", "-nostdin", "-list_devices", "true", "-f", "avfoundation", "-i", ""}
	}
	return nil
}
