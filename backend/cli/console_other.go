//go:build !windows

package cli

// attachConsole does nothing outside Windows: there a program started from a terminal
// has that terminal's standard streams already.
func attachConsole() {}
