package nodehost

import (
	"testing"
	"time"
)

// TestParseHIDIdle reads macOS ioreg's HIDIdleTime (nanoseconds); the
// sample is `ioreg -c IOHIDSystem -d 4` cut to the lines around it.
func TestParseHIDIdle(t *testing.T) {
	out := `+-o Root  <class IORegistryEntry, id 0x100000100, retain 31>
  +-o IOHIDSystem  <class IOHIDSystem, id 0x1000004c4, registered, matched, active, busy 0 (0 ms), retain 24>
    | {
    |   "HIDScrollCountMinDeltaToStart" = 30
    |   "HIDIdleTime" = 42123456789
    |   "HIDKeyboardKeysDefined" = Yes
    | }
`
	if d, ok := parseHIDIdle(out); !ok || d != 42123456789*time.Nanosecond {
		t.Fatalf("parseHIDIdle = %v %v", d, ok)
	}
	for _, bad := range []string{"", `"HIDIdleTime" = soon`, `"HIDIdleTime" = -5`, "no such key"} {
		if d, ok := parseHIDIdle(bad); ok {
			t.Errorf("parseHIDIdle(%q) = %v, want unknown", bad, d)
		}
	}
}
