//go:build unix

package admission

import (
	"io"
	"os"
	"syscall"
	"time"
)

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
