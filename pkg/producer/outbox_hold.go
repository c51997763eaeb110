package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/hermesq/hermesq/pkg/lockwant"
)

// bbolt lets one process at a time open a file. A process that polls and
// settles one round after another (a plugin with a backlog) would open the
// file, map it and fault its pages in again for every operation, so the
// outbox keeps the file open between operations while no other process
// waits for it: a process that has to wait marks its wait (pkg/lockwant)
// on a descriptor of the file, and the holder closes the file as soon as
// it sees the mark, when an operation ends or, while the file sits idle,
// every outboxLinger. Where a wait cannot be seen (no open file
// description locks), the file is closed after every operation, as a
// waiter could not be told apart from nobody. Past outboxHold after it was
// opened, the file is closed when the operation in course ends (or at the
// next look while idle) and the next operation opens it afresh, so that a
// waiter that does not mark its wait (another tool, an older build) waits
// at most that much longer than for one operation.
const (
	outboxHold   = 100 * time.Millisecond
	outboxLinger = 2 * time.Millisecond
)

// heldFile is the outbox file while this process has it open.
type heldFile struct {
	db       *bolt.DB
	look     *os.File // a descriptor of the file, to look for waiters' marks; nil: none
	openedAt time.Time
}

// open returns the file open for one operation (o.mu held): the one this
// process holds, or the file opened afresh, waiting for another process's
// operation at most LockWait. done ends the operation.
func (o *Outbox) open(ctx context.Context) (*bolt.DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h := o.held; h != nil {
		if time.Since(h.openedAt) < o.hold {
			return h.db, nil
		}
		if err := o.closeHeld(); err != nil {
			return nil, err
		}
	}
	wait := o.opts.LockWait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl), time.Millisecond)
	}
	// The mark of this wait, on a descriptor of its own (none before the
	// file exists: then nobody holds it).
	look, _ := os.Open(o.path)
	if look != nil {
		lockwant.Mark(look.Fd())
	}
	db, err := bolt.Open(o.path, 0o600, &bolt.Options{Timeout: wait})
	if err != nil {
		if look != nil {
			look.Close()
		}
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("outbox %s: waited %s: %w", o.path, wait, ErrLocked)
		}
		return nil, fmt.Errorf("outbox %s: open: %w", o.path, err)
	}
	if look != nil {
		lockwant.Unmark(look.Fd())
	} else {
		look, _ = os.Open(o.path)
	}
	o.held = &heldFile{db: db, look: look, openedAt: time.Now()}
	return db, nil
}

// done ends an operation on the file that open returned (o.mu held): the
// file is closed when the operation failed, another process waits for it
// (or that cannot be told), or the hold is over; otherwise it stays open
// for the next operation, looked at again every outboxLinger.
func (o *Outbox) done(opErr error) error {
	if o.held == nil {
		return nil
	}
	if opErr != nil || o.yieldDue() {
		return o.closeHeld()
	}
	if o.idle == nil {
		o.idle = time.AfterFunc(outboxLinger, o.lookAgain)
	} else {
		o.idle.Reset(outboxLinger)
	}
	return nil
}

// yieldDue reports whether the held file is to be closed now (o.mu held).
func (o *Outbox) yieldDue() bool {
	h := o.held
	if h.look == nil || time.Since(h.openedAt) >= o.hold {
		return true
	}
	want, known := lockwant.Others(h.look.Fd())
	return want || !known
}

// lookAgain closes the idle file when it is due (see done), or looks again
// after outboxLinger.
func (o *Outbox) lookAgain() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held == nil {
		return
	}
	if o.yieldDue() {
		_ = o.closeHeld() // nobody to tell: the next open starts afresh
		return
	}
	o.idle.Reset(outboxLinger)
}

// closeHeld closes the held file (o.mu held).
func (o *Outbox) closeHeld() error {
	h := o.held
	o.held = nil
	if h.look != nil {
		h.look.Close()
	}
	if err := h.db.Close(); err != nil {
		return fmt.Errorf("outbox %s: close: %w", o.path, err)
	}
	return nil
}
