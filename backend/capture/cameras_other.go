//go:build !linux

package capture

// v4l2Cameras is Linux's; elsewhere ffmpeg lists the devices.
func v4l2Cameras(string) ([]Camera, []string) { return nil, nil }
