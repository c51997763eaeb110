//go:build unix

package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// inputReady reports whether reading r would return at once (data, end
// of input or an error) rather than wait for a writer. A regular file
// never waits; a pipe, socket or terminal is asked with poll(2). Readers
// that are not files are taken as never waiting.
func inputReady(r io.Reader) func() bool {
	f, ok := r.(*os.File)
	if !ok {
		return alwaysReady
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return alwaysReady
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return alwaysReady
	}
	return func() bool {
		ready := true
		_ = rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			ready = err != nil || n > 0
		})
		return ready
	}
}
