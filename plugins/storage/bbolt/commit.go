package bbolt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Group commit. Writers of one process queue their operations; one of them
// commits everything queued in one bbolt transaction, and whatever arrives
// while that commit is in flight goes into the next one. There is no fixed
// delay (unlike bolt.DB.Batch's 10 ms), so a lone caller commits at once,
// and under load one fsync serves many callers.
//
// An operation checks everything before it writes: a domain error
// (conflict, fenced, not found…) is its result, with nothing written, and
// never a reason to roll back the other operations of the group. An
// unexpected error (bbolt itself failing) rolls the transaction back, and
// each operation of the group is then run again alone; operations are
// therefore pure functions of the transaction: they may run twice, and only
// set results that the second run overwrites.

type writeOp struct {
	// state: opPending while queued; the leader moves it to opTaken when
	// it puts the operation into a transaction, its caller to opAbandoned
	// when its context ends first (then it is never run).
	state atomic.Int32
	fn    func(*txn) error
	// atomic: any error of fn rolls back the whole transaction (Import).
	atomic bool
	err    error
	done   chan struct{}
}

const (
	opPending int32 = iota
	opTaken
	opAbandoned
)

type commitQueue struct {
	store   *Store
	mu      sync.Mutex
	pending []*writeOp
	leading bool
	commits atomic.Int64 // transactions committed or attempted, for tests
}

// update runs fn in a write transaction, grouped with concurrent writers.
func (s *Store) update(ctx context.Context, fn func(*txn) error) error {
	return s.group.run(ctx, &writeOp{fn: fn, done: make(chan struct{})})
}

// updateSession runs fn on a session's bucket and record in a write
// transaction (grouped as update); ErrNotFound when the session is absent.
func (s *Store) updateSession(ctx context.Context, id string, fn func(t *txn, sb *bolt.Bucket, rec *sessionRec) error) error {
	return s.update(ctx, func(t *txn) error {
		sb, rec, err := t.session(id)
		if err != nil {
			return err
		}
		return fn(t, sb, rec)
	})
}

// updateAtomic runs fn alone in a write transaction that any error of fn
// rolls back.
func (s *Store) updateAtomic(ctx context.Context, fn func(*txn) error) error {
	return s.group.run(ctx, &writeOp{fn: fn, atomic: true, done: make(chan struct{})})
}

// run queues op and waits for its commit, or for ctx to end: a caller's
// deadline bounds every write, whoever leads the group. The wait that can
// be long (for the file lock another process holds) is the one a caller
// leaves: an operation not yet in a transaction is abandoned and never
// written. Once its transaction holds the file it is seen through (a
// commit is short), so its caller learns what was really written.
func (q *commitQueue) run(ctx context.Context, op *writeOp) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bbolt: write %s: %w (nothing written): %w", q.store.path, err, backend.ErrUnavailable)
	}
	q.mu.Lock()
	q.pending = append(q.pending, op)
	lead := !q.leading
	if lead {
		q.leading = true
	}
	q.mu.Unlock()
	if lead {
		// The leader commits others' operations too: its own context
		// ending must not abandon them, so it leads in the background.
		go q.lead()
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
	}
	if op.state.CompareAndSwap(opPending, opAbandoned) {
		return fmt.Errorf("bbolt: write %s: %w (nothing written): %w", q.store.path, ctx.Err(), backend.ErrUnavailable)
	}
	<-op.done
	return op.err
}

// take marks op as run by the transaction holding the file; false when
// its caller abandoned it first.
func (op *writeOp) take() bool {
	return op.state.CompareAndSwap(opPending, opTaken) || op.state.Load() == opTaken
}

// lead commits the queued operations, again and again while more
// arrive, then gives leadership up. Operations whose callers gave up
// before their turn are dropped unrun.
func (q *commitQueue) lead() {
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.leading = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.commit(context.Background(), batch)
	}
}

func (q *commitQueue) commit(ctx context.Context, batch []*writeOp) {
	s := q.store
	var touched map[string]struct{}
	err := q.tryCommit(ctx, batch, &touched)
	if errors.Is(err, errRetryAlone) {
		if len(batch) > 1 {
			for _, op := range batch {
				q.commit(ctx, []*writeOp{op})
			}
			return
		}
		err = nil // batch[0].err holds the failure
	} else if err != nil {
		for _, op := range batch {
			op.err = err
		}
	}
	if err == nil && len(touched) > 0 {
		s.local.notify()
	}
	for _, op := range batch {
		close(op.done)
	}
}

// errRetryAlone marks a transaction rolled back because one operation
// failed unexpectedly.
var errRetryAlone = errors.New("retry alone")

func (q *commitQueue) tryCommit(ctx context.Context, batch []*writeOp, touched *map[string]struct{}) (err error) {
	s := q.store
	db, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	panicked := false
	defer func() { s.release(panicked) }()
	// The file is ours: the operations still wanted are run; those whose
	// callers gave up while it was locked are dropped, unrun.
	live := batch[:0:0]
	for _, op := range batch {
		if op.take() {
			live = append(live, op)
		}
	}
	batch = live
	if len(batch) == 0 {
		return nil
	}
	q.commits.Add(1)
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			err = corrupt("write", s.path, r)
		}
	}()
	err = db.Update(func(tx *bolt.Tx) error {
		t := &txn{tx: tx, write: true, memo: &s.memo}
		// Each session record is read once and written once for the whole
		// group: operations check before they change a record, so a
		// refusal leaves it as it was for the next one.
		err := t.batched(func() error {
			for _, op := range batch {
				op.err = wrapBolt(s.path, op.fn(t))
				if op.err != nil && (op.atomic || !isDomain(op.err)) {
					return errRetryAlone
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		*touched = t.touched
		return t.logChanges()
	})
	if err != nil && !errors.Is(err, errRetryAlone) {
		return wrapBolt(s.path, err)
	}
	return err
}

// isDomain reports whether err is a result of the contract (the operation
// wrote nothing) rather than a failure of the store.
func isDomain(err error) bool {
	switch backend.CodeOf(err) {
	case backend.CodeInvalid, backend.CodeNotFound, backend.CodeConflict, backend.CodeFenced, backend.CodeForbidden:
		return true
	}
	return false
}

// localNotifier wakes this process's subscribers after its own commits.
type localNotifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func (n *localNotifier) add() chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs == nil {
		n.subs = map[chan struct{}]struct{}{}
	}
	ch := make(chan struct{}, 1)
	n.subs[ch] = struct{}{}
	return ch
}

func (n *localNotifier) remove(ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.subs, ch)
}

func (n *localNotifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
