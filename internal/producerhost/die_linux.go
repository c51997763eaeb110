package producerhost

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the plugin when the host dies, even
// by SIGKILL (Linux: the parent-death signal).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
