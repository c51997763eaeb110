package producer

import (
	"context"

	bolt "go.etcd.io/bbolt"
)

// groupCall is one write waiting to share a transaction with others.
type groupCall struct {
	fn   func(*bolt.Tx) error
	err  error
	done chan struct{}
}

// grouped runs each of fns in a write transaction shared with the other
// grouped writes of this process waiting meanwhile, and returns each fn's
// own error. Settles and polls arriving together (the host settles a
// poll's offers at once, and with a backlog while it polls for the next)
// so cost one open of the file and one commit (one fsync) instead of one
// each.
//
// The caller that takes the outbox's turn commits every write waiting
// then, its own among them; a write whose turn another caller took is
// done once that caller gives the turn back. A fn that fails rolls the
// shared transaction back; the group is then run again without it (its
// error goes to its caller alone), so a fn may run more than once and must
// have no effect outside tx.
func (o *Outbox) grouped(ctx context.Context, fns []func(*bolt.Tx) error) []error {
	errs := make([]error, len(fns))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	calls := make([]*groupCall, len(fns))
	for i, fn := range fns {
		calls[i] = &groupCall{fn: fn, done: make(chan struct{})}
	}
	o.gmu.Lock()
	o.group = append(o.group, calls...)
	o.gmu.Unlock()

	o.mu.Lock()
	o.gmu.Lock()
	group := o.group
	o.group = nil
	o.gmu.Unlock()
	if len(group) > 0 {
		// Another caller's deadline must not fail this one's write: the
		// wait for the file is bounded by LockWait alone.
		o.commitGroup(context.WithoutCancel(ctx), group)
	}
	o.mu.Unlock()

	for i, c := range calls {
		<-c.done
		errs[i] = c.err
	}
	return errs
}

// commitGroup runs the calls in one transaction (o.mu held), again without
// any that fails, and ends each with its error.
func (o *Outbox) commitGroup(ctx context.Context, calls []*groupCall) {
	end := func(cs []*groupCall, err error) {
		for _, c := range cs {
			c.err = err
			close(c.done)
		}
	}
	db, err := o.open(ctx)
	if err != nil {
		end(calls, err)
		return
	}
	for len(calls) > 0 {
		failed := -1
		var ferr error
		err = db.Update(func(tx *bolt.Tx) error {
			if err := createBuckets(tx); err != nil {
				return err
			}
			for i, c := range calls {
				if err := c.fn(tx); err != nil {
					failed, ferr = i, err
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			break
		}
		end(calls[failed:failed+1], ferr)
		calls = append(calls[:failed:failed], calls[failed+1:]...)
	}
	if derr := o.done(err); err == nil {
		err = derr
	}
	end(calls, err)
}
