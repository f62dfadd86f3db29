//go:build unix

package nodehost

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setGroup starts the command as the leader of a new process group, so the
// timeout can kill everything it started.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group p leads. The group id stays
// reserved while any member lives, so this is safe after p was reaped.
func killGroup(p *os.Process) error {
	if p == nil {
		return nil
	}
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// signalOf names the signal that ended the process ("" when it exited).
func signalOf(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}

// killLeftovers kills what the exited process left in its group.
func killLeftovers(p *os.Process) { _ = killGroup(p) }
