package bbolt

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Subscribe reports the sessions written after the call, by this process
// or any other. Another process's commit is seen through fsnotify on the
// store's directory (a watch holds no open file, so the bbolt file stays
// free for other processes); which sessions changed is read from the
// store's change log. A subscriber that falls further behind than the log
// reports every session.
func (s *Store) Subscribe(ctx context.Context) (<-chan string, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, backend.Errorf(backend.ErrInternal, "bbolt: subscribe: %v", err)
	}
	if err := w.Add(filepath.Dir(s.path)); err != nil {
		_ = w.Close()
		return nil, backend.Errorf(backend.ErrInternal, "bbolt: subscribe to %s: %v", s.path, err)
	}
	var last uint64
	if err := s.view(ctx, func(t *txn) error {
		k, _ := t.tx.Bucket(bucketChanges).Cursor().Last()
		last = fromU64(k)
		return nil
	}); err != nil {
		_ = w.Close()
		return nil, err
	}
	local := s.local.add()
	out := make(chan string)
	go func() {
		defer close(out)
		defer s.local.remove(local)
		defer w.Close()
		var (
			pending []string
			queued  = map[string]bool{}
			retry   <-chan time.Time
		)
		refresh := func() (stop bool) {
			// One commit writes several pages: take every event already
			// queued, then read the change log once.
			for drained := false; !drained; {
				select {
				case _, ok := <-w.Events:
					drained = !ok
				case <-local:
				default:
					drained = true
				}
			}
			ids, next, err := s.changesAfter(ctx, last)
			if errors.Is(err, errStoreClosed) {
				return true
			}
			if err != nil {
				// Locked or briefly unreadable: try again soon.
				retry = time.After(100 * time.Millisecond)
				return false
			}
			last = next
			for _, id := range ids {
				if !queued[id] {
					queued[id] = true
					pending = append(pending, id)
				}
			}
			return false
		}
		for {
			var send chan string
			var head string
			if len(pending) > 0 {
				send, head = out, pending[0]
			}
			select {
			case <-ctx.Done():
				return
			case send <- head:
				pending = pending[1:]
				delete(queued, head)
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if filepath.Clean(ev.Name) == s.path && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 && refresh() {
					return
				}
			case <-w.Errors:
				if refresh() {
					return
				}
			case <-local:
				if refresh() {
					return
				}
			case <-retry:
				retry = nil
				if refresh() {
					return
				}
			}
		}
	}()
	return out, nil
}

// changesAfter returns the sessions changed after log position last, and
// the newest position.
func (s *Store) changesAfter(ctx context.Context, last uint64) ([]string, uint64, error) {
	var ids []string
	next := last
	err := s.view(ctx, func(t *txn) error {
		ids, next = nil, last
		c := t.tx.Bucket(bucketChanges).Cursor()
		first, _ := c.First()
		if first != nil && fromU64(first) > last+1 {
			// Fell behind the log: every session may have changed.
			sc := t.tx.Bucket(bucketSessions).Cursor()
			for k, v := sc.First(); k != nil; k, v = sc.Next() {
				if v == nil {
					ids = append(ids, string(k))
				}
			}
			k, _ := c.Last()
			next = fromU64(k)
			return nil
		}
		for k, v := c.Seek(u64(last + 1)); k != nil; k, v = c.Next() {
			ids = append(ids, string(v))
			next = fromU64(k)
		}
		return nil
	})
	return ids, next, err
}
