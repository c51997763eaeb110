//go:build unix && !linux

package process

import (
	"os/exec"
	"syscall"
)

func setsid(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
