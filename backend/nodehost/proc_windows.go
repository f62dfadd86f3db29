//go:build windows

package nodehost

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// setGroup starts the command in a new process group (CREATE_NEW_PROCESS_GROUP).
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// killGroup ends the process and its children with `taskkill /T /F`, else
// the process alone. After the process has exited its children are no
// longer reachable this way (Windows keeps no group to signal): on Windows a
// run's leftovers may outlive it.
func killGroup(p *os.Process) error {
	if p == nil {
		return nil
	}
	if err := exec.Command("taskkill", "/T", "/F", "/PID", strconv.Itoa(p.Pid)).Run(); err == nil {
		return nil
	}
	return p.Kill()
}

// signalOf is "" on Windows (no signals).
func signalOf(*os.ProcessState) string { return "" }

// killLeftovers does nothing on Windows: the process was reaped and its id
// may already name another process.
func killLeftovers(*os.Process) {}
