package cli

// consoleWanted reports whether a command line is one a person types in a terminal and
// reads the answer of: every command but the desktop app (no command) and the hidden
// worker; the desktop app only when asked for its help. On Windows atrium.exe is a GUI
// program (no console window on double-click), so for these it attaches to the console of
// the terminal that started it (attachConsole); the desktop app stays detached, so that a
// Ctrl+C typed later in that terminal does not close the window.
func consoleWanted(args []string) bool {
	cmd, rest := takeCommand(args)
	switch cmd {
	case "worker":
		return false
	case "":
		for _, a := range rest {
			if isHelpFlag(a) {
				return true
			}
		}
		return false
	}
	return true
}
