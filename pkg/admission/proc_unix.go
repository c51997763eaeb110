//go:build unix

package admission

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the handler in its own process group and makes
// cancellation kill the whole group, so a handler's children (a shell
// script's pipeline) do not outlive a timeout.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
