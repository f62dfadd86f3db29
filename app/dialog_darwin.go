//go:build darwin

package app

import "os/exec"

func showError(title, message string) {
	script := "display dialog " + appleScriptString(message) + " with title " + appleScriptString(title) +
		` buttons {"OK"} default button "OK" with icon stop`
	_ = exec.Command("osascript", "-e", script).Run()
}
