//go:build !unix

package tools

import "os/exec"

// killGroup leaves cmd as it is: on this platform the context kills the
// process itself (exec.CommandContext), and WaitDelay bounds the wait for
// its output pipes.
func killGroup(cmd *exec.Cmd) {}
