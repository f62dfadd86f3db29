//go:build unix

package atrium

import (
	"os"
	"testing"
)

// TestLANOpenFileReserve: with an open-file limit of 1,024 the LAN
// listeners keep 256 descriptors for the rest of the process. When the
// process's other files reach the reserve (here /dev/null opened ~770
// times, as a watcher of a large workspace or a burst of local clients
// might), a new LAN connection is closed at once and audited, and the
// person still connects on 127.0.0.1 and reads a file; once the files are
// closed the LAN is served again.
func TestLANOpenFileReserve(t *testing.T) {
	lowerFileLimit(t, 1024)
	k := startAttack(t)
	var filler []*os.File
	defer func() {
		for _, f := range filler {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		must(t, err)
		filler = append(filler, f)
		if f.Fd() >= 770 {
			break
		}
	}
	k.closedAtOnce("127.0.0.83", "near its open-file limit")
	var got struct{ Text string }
	must(t, k.admin.Call(k.ctx, "memory.get", map[string]any{"path": "memory/global/project-status.md"}, &got))
	if got.Text == "" {
		t.Error("memory.get memory/global/project-status.md: empty")
	}
	for _, f := range filler {
		f.Close()
	}
	filler = nil
	if code, err := k.get("127.0.0.83", "/healthz"); code != 200 {
		t.Errorf("the LAN once the files are closed: %d %v", code, err)
	}
}
