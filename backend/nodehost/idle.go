package nodehost

import (
	"bufio"
	"strconv"
	"strings"
	"time"
)

// parseHIDIdle reads the first "HIDIdleTime" = <nanoseconds> of
// `ioreg -c IOHIDSystem` output (macOS: the time since the last keyboard,
// mouse or trackpad event of the console session).
func parseHIDIdle(out string) (time.Duration, bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), `"HIDIdleTime" =`)
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil || ns < 0 {
			return 0, false
		}
		return time.Duration(ns), true
	}
	return 0, false
}
