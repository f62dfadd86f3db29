package capture

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

var (
	// dshowLine: `[dshow @ 0x…] "Integrated Camera" (video)` (ffmpeg ≥ 5)
	// or `[dshow @ 0x…]  "Integrated Camera"` under a section header.
	dshowLine = regexp.MustCompile(`^\[dshow @ [^\]]*\]\s+"([^"]+)"(?:\s+\((video|audio|none)\))?\s*$`)
	// avfLine: `[AVFoundation indev @ 0x…] [0] FaceTime HD Camera`.
	avfLine = regexp.MustCompile(`^\[AVFoundation [^\]]*\]\s+\[(\d+)\]\s+(.+?)\s*$`)
)

// ParseDevices reads the cameras and microphones from the stderr of
// ffmpeg's ListDevicesArgs(goos) run: Windows DirectShow names (both the
// "(video)"/"(audio)" form of ffmpeg ≥ 5 and the older section headers),
// macOS AVFoundation indexes and names ("Capture screen N" entries are
// screens, not cameras). Facing follows the order (Camera.Facing).
func ParseDevices(goos, stderr string) (cams []Camera, mics []string) {
	section := ""
	for _, raw := range strings.Split(strings.ReplaceAll(stderr, "\r\n", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case strings.Contains(line, "video devices"):
			section = "video"
			continue
		case strings.Contains(line, "audio devices"):
			section = "audio"
			continue
		}
		switch goos {
		case "windows":
			m := dshowLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			kind := m[2]
			if kind == "" {
				kind = section
			}
			switch kind {
			case "video":
				cams = append(cams, Camera{ID: m[1], Label: m[1]})
			case "audio":
				mics = append(mics, m[1])
			}
		case "darwin":
			m := avfLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			switch {
			case section == "video" && !strings.HasPrefix(m[2], "Capture screen"):
				cams = append(cams, Camera{ID: m[1], Label: m[2]})
			case section == "audio":
				mics = append(mics, m[2])
			}
		}
	}
	return withFacing(cams), mics
}

// withFacing names the first camera front and the second back.
func withFacing(cams []Camera) []Camera {
	for i := range cams {
		switch i {
		case 0:
			cams[i].Facing = "front"
		case 1:
			cams[i].Facing = "back"
		}
	}
	return cams
}

// pickCamera is the camera facing names among cams (device order: front
// the first, back the second, else the first).
func pickCamera(cams []Camera, facing string) Camera {
	if facing == "back" && len(cams) > 1 {
		return cams[1]
	}
	return cams[0]
}

// Cameras lists the cameras ffmpeg can open on this computer (Linux: the
// V4L2 capture devices under DevDir; Windows and macOS: ffmpeg's device
// list). None is an empty list, not an error; errors wrap
// ErrFFmpegNotFound or ErrFailed.
func (c *Capturer) Cameras(ctx context.Context) ([]Camera, error) {
	d, err := c.devices(ctx)
	return d.cams, err
}

// found is what devices found: cameras, (Windows) microphones, and a note
// for an empty list (devices this user may not open).
type found struct {
	cams []Camera
	mics []string
	note string
}

// devices lists cameras and (Windows) microphones.
func (c *Capturer) devices(ctx context.Context) (found, error) {
	if c.err != nil {
		return found{}, c.err
	}
	if c.testCameras != nil {
		return found{cams: withFacing(append([]Camera(nil), c.testCameras...))}, nil
	}
	if c.o.GOOS == "linux" {
		cams, denied := v4l2Cameras(c.o.DevDir)
		f := found{cams: withFacing(cams)}
		if len(denied) > 0 {
			f.note = fmt.Sprintf(" (%s may not be opened by this user: add it to the video group)", strings.Join(denied, ", "))
		}
		return f, nil
	}
	args := ListDevicesArgs(c.o.GOOS)
	if args == nil {
		return found{}, nil
	}
	// Listing "fails" by design (the dummy input); what matters is stderr.
	out, err := c.run(ctx, args)
	if ctx.Err() != nil {
		return found{}, err
	}
	cams, mics := ParseDevices(c.o.GOOS, out)
	return found{cams: cams, mics: mics}, nil
}

// noCamera is ErrNoCamera with what was looked at.
func (c *Capturer) noCamera(why string) error {
	switch c.o.GOOS {
	case "linux":
		return fmt.Errorf("%w: no video capture device under %s/video*%s", ErrNoCamera, c.o.DevDir, why)
	case "windows":
		return fmt.Errorf("%w: ffmpeg lists no DirectShow video device%s", ErrNoCamera, why)
	case "darwin":
		return fmt.Errorf("%w: ffmpeg lists no AVFoundation camera (is camera access allowed for the terminal in System Settings › Privacy?)%s", ErrNoCamera, why)
	}
	return fmt.Errorf("%w: camera capture is not supported on %s", ErrNoCamera, c.o.GOOS)
}
