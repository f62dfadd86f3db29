//go:build unix

package tools

import (
	"os/exec"
	"syscall"
)

// killGroup runs cmd in its own process group and kills the whole group
// when its context ends, so that children it started do not outlive it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
