//go:build !darwin && !windows

package nodehost

import "time"

// LastInput is unknown on Linux and the BSDs: X11's idle time needs the
// XScreenSaver extension of a display the host may not have, Wayland has
// no common interface, and logind's IdleHint says only whether a session
// has been idle past the desktop's threshold. An honest "unknown" (false)
// is reported instead of a guess.
func LastInput() (time.Duration, bool) { return 0, false }
