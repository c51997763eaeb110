//go:build unix

package admission

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup starts the handler in its own process group, so a
// handler's children (a shell script's pipeline) can be killed with it; on
// Linux the handler also gets SIGKILL when the thread that started it ends
// (setDeathSignal).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
}

// killGroup kills the handler's process group: the handler if it still
// runs, and whatever it left running.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// readBuffered copies into w what is in the pipe f now, without waiting
// for more.
func readBuffered(f *os.File, w io.Writer, buf []byte) {
	if f.SetReadDeadline(time.Time{}) != nil {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return true // empty (EAGAIN), ended, or failed: done, never wait
			}
			_, _ = w.Write(buf[:n])
		}
	})
}
