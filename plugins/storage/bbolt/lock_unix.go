//go:build unix

package bbolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/lockwant"
)

// The bbolt file is guarded by an exclusive flock on a sidecar file,
// "<path>.lock", taken before bolt.Open. bbolt's own lock wait retries
// every 50 ms, which lets a waiting process starve behind a busy one; a
// blocking flock is woken by the kernel the moment the holder lets go.
// Blocking calls cannot be given a deadline, so the wait runs in a
// goroutine; a waiter whose caller gave up is kept and adopted by the next
// open of the same path (at most one stray wait per path), and releases the
// lock itself if nobody adopts it. While it waits, the descriptor carries
// the mark of pkg/lockwant, so the holder lets go at once.

// fileLock is a held sidecar lock.
type fileLock struct{ fd int }

func (l *fileLock) unlock() {
	if l == nil {
		return
	}
	_ = unix.Flock(l.fd, unix.LOCK_UN)
	_ = unix.Close(l.fd)
}

// othersWant reports whether another process (or another Store of this
// one) waits for the lock; known is false when that cannot be told.
func (l *fileLock) othersWant() (want, known bool) { return lockwant.Others(uintptr(l.fd)) }

type lockWaiter struct {
	path string
	fd   int
	done chan struct{}

	mu        sync.Mutex
	err       error
	finished  bool
	abandoned bool
	released  bool
}

var (
	strayMu sync.Mutex
	stray   = map[string]*lockWaiter{}
)

// lockFile takes the exclusive lock on path, waiting until deadline, then
// failing with ErrUnavailable.
func lockFile(ctx context.Context, path string, deadline time.Time) (*fileLock, error) {
	w := adopt(path)
	if w == nil {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("bbolt: open lock file %s: %v: %w", path, err, backend.ErrInternal)
		}
		err = flockRetry(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &fileLock{fd: fd}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = unix.Close(fd)
			return nil, fmt.Errorf("bbolt: lock %s: %v: %w", path, err, backend.ErrInternal)
		}
		w = &lockWaiter{path: path, fd: fd, done: make(chan struct{})}
		lockwant.Mark(uintptr(fd))
		go w.wait()
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var why string
	select {
	case <-w.done:
	case <-timer.C:
		why = "timed out"
	case <-ctx.Done():
		why = ctx.Err().Error()
	}
	w.mu.Lock()
	if w.finished {
		err := w.err
		w.mu.Unlock()
		if err != nil {
			_ = unix.Close(w.fd)
			return nil, fmt.Errorf("bbolt: lock %s: %v: %w", path, err, backend.ErrInternal)
		}
		return &fileLock{fd: w.fd}, nil
	}
	w.abandoned = true
	w.mu.Unlock()
	strayMu.Lock()
	if stray[path] == nil {
		stray[path] = w
	}
	strayMu.Unlock()
	return nil, fmt.Errorf("bbolt: store %s is locked by another process (waited %s): %w",
		trimLock(path), why, backend.ErrUnavailable)
}

// adopt takes over a wait a previous caller gave up on, if still pending.
func adopt(path string) *lockWaiter {
	strayMu.Lock()
	w := stray[path]
	delete(stray, path)
	strayMu.Unlock()
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		return nil
	}
	w.abandoned = false
	return w
}

func (w *lockWaiter) wait() {
	err := flockRetry(w.fd, unix.LOCK_EX)
	lockwant.Unmark(uintptr(w.fd))
	w.mu.Lock()
	w.err, w.finished = err, true
	if w.abandoned {
		w.released = true
		if err == nil {
			_ = unix.Flock(w.fd, unix.LOCK_UN)
		}
		_ = unix.Close(w.fd)
		strayMu.Lock()
		if stray[w.path] == w {
			delete(stray, w.path)
		}
		strayMu.Unlock()
	}
	w.mu.Unlock()
	close(w.done)
}

// releaseFile drops the flock bbolt took on f and closes f, for a handle a
// panic inside bolt.Open left behind (a no-op when db.Close closed it).
func releaseFile(f *os.File) {
	if fd := f.Fd(); fd != ^uintptr(0) {
		_ = unix.Flock(int(fd), unix.LOCK_UN)
	}
	_ = f.Close()
}

func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func trimLock(p string) string {
	const sfx = ".lock"
	if len(p) > len(sfx) && p[len(p)-len(sfx):] == sfx {
		return p[:len(p)-len(sfx)]
	}
	return p
}
