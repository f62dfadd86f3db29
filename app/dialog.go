package app

import (
	"os/exec"
	"strings"
)

// Fatal shows message in a native error dialog titled title and waits
// until it is closed: for a start failure of a double-clicked app, which
// has no terminal to print to. It is best effort: Windows' MessageBox,
// macOS' osascript, else the first of zenity, kdialog, xmessage found on
// PATH (Linux); with none of them nothing is shown (the log has it).
func Fatal(title, message string) {
	showError(title, message)
}

// linuxDialog runs the first dialog program found on PATH.
func linuxDialog(title, message string) {
	for _, c := range [][]string{
		{"zenity", "--error", "--no-markup", "--title=" + title, "--text=" + message},
		{"kdialog", "--title", title, "--error", message},
		{"xmessage", "-center", title + ":\n\n" + message},
	} {
		if _, err := exec.LookPath(c[0]); err == nil {
			_ = exec.Command(c[0], c[1:]...).Run()
			return
		}
	}
}

// appleScriptString quotes s for AppleScript.
func appleScriptString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
