//go:build linux

package capture

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// v4l2Capability is struct v4l2_capability (linux/videodev2.h), 104 bytes.
type v4l2Capability struct {
	Driver       [16]byte
	Card         [32]byte
	BusInfo      [32]byte
	Version      uint32
	Capabilities uint32
	DeviceCaps   uint32
	Reserved     [3]uint32
}

// V4L2 constants (linux/videodev2.h): VIDIOC_QUERYCAP = _IOR('V', 0,
// struct v4l2_capability).
const (
	vidiocQueryCap      = 0x80685600
	v4l2CapVideoCapture = 0x00000001
	v4l2CapDeviceCaps   = 0x80000000
)

// v4l2Cameras lists the video capture devices dir/video<N> in the order of
// N (VIDIOC_QUERYCAP: the node's device caps say video capture, so a UVC
// camera's metadata node is left out), and the devices this user may not
// open (permission denied).
func v4l2Cameras(dir string) (cams []Camera, denied []string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "video*"))
	num := func(p string) int {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "video"))
		if err != nil {
			return 1 << 30
		}
		return n
	}
	slices.SortFunc(paths, func(a, b string) int { return num(a) - num(b) })
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR|unix.O_NONBLOCK, 0)
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				denied = append(denied, p)
			}
			continue
		}
		var c v4l2Capability
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), vidiocQueryCap, uintptr(unsafe.Pointer(&c)))
		f.Close()
		if errno != 0 {
			continue // not a V4L2 device
		}
		caps := c.Capabilities
		if caps&v4l2CapDeviceCaps != 0 {
			caps = c.DeviceCaps
		}
		if caps&v4l2CapVideoCapture == 0 {
			continue
		}
		label := strings.TrimRight(string(c.Card[:]), "\x00")
		if label == "" {
			label = filepath.Base(p)
		}
		cams = append(cams, Camera{ID: p, Label: label})
	}
	return cams, denied
}
