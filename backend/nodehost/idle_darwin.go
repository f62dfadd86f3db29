package nodehost

import (
	"context"
	"os/exec"
	"time"
)

// LastInput is the time since the last keyboard, mouse or trackpad event
// of the console session, from IOKit's HIDIdleTime through `ioreg -c
// IOHIDSystem -d 4` (a few milliseconds; no cgo). False when ioreg fails
// or prints no HIDIdleTime (e.g. no console session).
func LastInput() (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/sbin/ioreg", "-c", "IOHIDSystem", "-d", "4").Output()
	if err != nil {
		return 0, false
	}
	return parseHIDIdle(string(out))
}
