//go:build unix

package admission

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the handler in its own process group and makes
// cancellation kill the whole group, so a handler's children (a shell
// script's pipeline) do not outlive a timeout; on Linux the handler also
// gets SIGKILL when the drainer dies (setDeathSignal).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killGroup kills what is left of the handler's process group once the
// handler itself has exited: nothing of a turn outlives it.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
