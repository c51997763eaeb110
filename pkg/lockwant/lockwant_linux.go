//go:build linux

package lockwant

import "golang.org/x/sys/unix"

// wantByte is the byte a waiter marks. A byte-range lock may lie past the
// end of a file, so the file may be empty.
const wantByte = 0

// Mark marks the descriptor fd as waiting for the lock.
func Mark(fd uintptr) {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: wantByte, Len: 1}
	_ = unix.FcntlFlock(fd, unix.F_OFD_SETLK, &lk)
}

// Unmark drops the mark of Mark once fd holds the lock (or gave up).
func Unmark(fd uintptr) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: wantByte, Len: 1}
	_ = unix.FcntlFlock(fd, unix.F_OFD_SETLK, &lk)
}

// Others reports whether a descriptor other than fd (the holder's, on the
// same file) marks a wait; known is false when the kernel cannot tell.
func Others(fd uintptr) (want, known bool) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: wantByte, Len: 1}
	if err := unix.FcntlFlock(fd, unix.F_OFD_GETLK, &lk); err != nil {
		return false, false
	}
	return lk.Type != unix.F_UNLCK, true
}
