//go:build linux

package bbolt

import "golang.org/x/sys/unix"

// A process waiting for the sidecar lock says so with an open file
// description (OFD) read lock on one byte of the sidecar file, taken on the
// descriptor it waits with and dropped once it holds the lock. OFD locks
// are separate from flock and from each other's descriptors, so the holder
// can ask the kernel whether any other descriptor holds that byte, and
// yield the file at once instead of keeping it open for its own next
// operation. The mark is advisory: a waiter that cannot set it (an old
// kernel, a file system without byte-range locks) only waits as long as
// the holder keeps the file open when nobody waits.

// wantByte is the byte of the sidecar file a waiter marks. The file stays
// empty; a byte-range lock may lie past the end of a file.
const wantByte = 0

// markWant marks the descriptor fd as waiting for the lock.
func markWant(fd int) {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: wantByte, Len: 1}
	_ = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
}

// unmarkWant drops the mark of markWant once fd holds the lock.
func unmarkWant(fd int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: wantByte, Len: 1}
	_ = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
}

// othersWant reports whether a descriptor other than fd (the holder's)
// marks a wait for the lock; known is false when the kernel cannot tell.
func othersWant(fd int) (want, known bool) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: wantByte, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
		return false, false
	}
	return lk.Type != unix.F_UNLCK, true
}
