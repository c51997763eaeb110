//go:build unix && !linux

package admission

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the handler in its own process group, so a
// handler's children (a shell script's pipeline) can be killed with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the handler's process group: the handler if it still
// runs, and whatever it left running.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
