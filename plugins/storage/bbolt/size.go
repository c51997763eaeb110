package bbolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Size is the size of the bbolt file.
func (s *Store) Size(ctx context.Context) (int64, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, fmt.Errorf("bbolt: size of %s: %v: %w", s.path, err, backend.ErrInternal)
	}
	return fi.Size(), nil
}

// compactTxSize bounds one transaction of the copy Reclaim writes.
const compactTxSize = 16 << 20

// Reclaim writes a compacted copy of the file and renames it over the
// original, as `bbolt compact` does, while holding the store's sidecar
// lock and with no operation of this process in flight: other processes
// wait for the lock as for any write, then open the new file. The copy is
// synced before the rename and the folder after it, so a crash leaves
// either the old file or the new one, each complete; a copy left behind by
// a crash is overwritten by the next Reclaim.
func (s *Store) Reclaim(ctx context.Context) (backend.ReclaimResult, error) {
	var res backend.ReclaimResult
	release, err := s.exclusive(ctx)
	if err != nil {
		return res, err
	}
	defer release()
	fi, err := os.Stat(s.path)
	if err != nil {
		return res, fmt.Errorf("bbolt: reclaim %s: %v: %w", s.path, err, backend.ErrInternal)
	}
	res.Before = fi.Size()
	fail := func(step string, err error) (backend.ReclaimResult, error) {
		return res, fmt.Errorf("bbolt: reclaim %s: %s: %v: %w", s.path, step, err, backend.ErrInternal)
	}
	src, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return fail("open", err)
	}
	defer src.Close()
	if err := checkSchema(src, s.path); err != nil {
		return res, err
	}
	tmp := s.path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return fail("create the copy", err)
	}
	if err := bolt.Compact(dst, src, compactTxSize); err != nil {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return fail("copy", err)
	}
	if err := dst.Sync(); err != nil {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return fail("sync the copy", err)
	}
	if err := dst.Close(); err != nil {
		_ = os.Remove(tmp)
		return fail("close the copy", err)
	}
	if err := src.Close(); err != nil {
		_ = os.Remove(tmp)
		return fail("close", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		_ = os.Remove(tmp)
		return fail("rename the copy over the store", err)
	}
	if d, err := os.Open(filepath.Dir(s.path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	if fi, err := os.Stat(s.path); err == nil {
		res.After = fi.Size()
	}
	return res, nil
}

// exclusive waits until no operation of this process has the file open,
// then takes the sidecar lock itself and keeps every other operation of
// the process waiting (as for an open in progress) until release.
func (s *Store) exclusive(ctx context.Context) (release func(), err error) {
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("bbolt: store %s: %w", s.path, errStoreClosed)
		}
		if s.closeIdleLocked() {
			continue // it lingered after the last operation
		}
		var wait chan struct{}
		switch {
		case s.db != nil:
			if s.closing == nil {
				s.closing = make(chan struct{})
			}
			wait = s.closing
		case s.opening != nil:
			wait = s.opening
		}
		if wait == nil {
			break
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("bbolt: reclaim %s: %v: %w", s.path, ctx.Err(), backend.ErrUnavailable)
		}
		s.mu.Lock()
	}
	gate := make(chan struct{})
	s.opening = gate
	s.mu.Unlock()
	deadline := time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	lock, err := lockFile(ctx, s.path+".lock", deadline)
	done := func() {
		s.mu.Lock()
		close(gate)
		s.opening = nil
		s.mu.Unlock()
	}
	if err != nil {
		done()
		return nil, err
	}
	return func() {
		lock.unlock()
		done()
	}, nil
}
