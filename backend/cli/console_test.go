package cli

import "testing"

// The Windows build is a GUI program; consoleWanted decides which command lines attach to
// the terminal's console (console_windows.go). The decision itself is platform-free.
func TestConsoleWanted(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false}, // double-click: the window
		{[]string{"--workspace", `C:\notes`}, false}, // the window on another workspace
		{[]string{"--help"}, true},                   // the desktop's help, read in the terminal
		{[]string{"-h"}, true},
		{[]string{"version"}, true},
		{[]string{"serve", "--port", "1"}, true},
		{[]string{"--home", `C:\h`, "memory", "search", "x"}, true},
		{[]string{"help"}, true},
		{[]string{"worker", "--profile", "p"}, false}, // started by the app with pipes
		{[]string{"--home", "h", "worker"}, false},
	} {
		if got := consoleWanted(c.args); got != c.want {
			t.Errorf("consoleWanted(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
