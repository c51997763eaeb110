package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"time"

	bolt "go.etcd.io/bbolt"
)

// depthQueue is figure 6's reference on a store: the same shape of queue as
// hermesq's with none of its rules, beside it on the same machine (Redis:
// the same server), so that what depth costs it is what depth costs the
// store itself.
type depthQueue interface {
	fill(ctx context.Context, n int) error
	admit(ctx context.Context, n int) (time.Duration, error)
	drain(ctx context.Context, n int) (time.Duration, error)
	close()
}

// rawBoltQueue is figure 6's reference on bbolt: the records, queue and
// identities of figures 1 and 2 (rawPut) in a bbolt file of their own,
// beside the store's. It admits one record a commit, as hermesq's single
// admits do, and drains rawDrainRun heads a commit, as a drain step does.
type rawBoltQueue struct {
	db   *bolt.DB
	next int // the next record to admit
}

func newRawBoltQueue(path string) (*rawBoltQueue, error) {
	db, err := rawOpen(path)
	if err != nil {
		return nil, err
	}
	return &rawBoltQueue{db: db}, nil
}

func (q *rawBoltQueue) close() { q.db.Close() }

// fill admits n into the empty queue, 1,000 a commit.
func (q *rawBoltQueue) fill(_ context.Context, n int) error {
	if err := rawFill(q.db, n); err != nil {
		return fmt.Errorf("fill the raw queue: %w", err)
	}
	q.next = n
	return nil
}

// admit admits n, one commit each, and returns the time they took.
func (q *rawBoltQueue) admit(_ context.Context, n int) (time.Duration, error) {
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := q.db.Update(func(tx *bolt.Tx) error { return rawPut(tx, q.next) }); err != nil {
			return 0, fmt.Errorf("raw admit: %w", err)
		}
		q.next++
	}
	return time.Since(t0), nil
}

// drain drains n from the head, rawDrainRun a commit (each record read and
// written back settled, and taken off the queue), and returns the time it
// took.
func (q *rawBoltQueue) drain(_ context.Context, n int) (time.Duration, error) {
	return drainRuns(n, func(most int) (k int, err error) {
		err = q.db.Update(func(tx *bolt.Tx) error {
			recs, queued := tx.Bucket(rawBuckets[0]), tx.Bucket(rawBuckets[1])
			var heads [][]byte
			c := queued.Cursor()
			for seq, _ := c.First(); seq != nil && len(heads) < most; seq, _ = c.Next() {
				heads = append(heads, bytes.Clone(seq))
			}
			for _, seq := range heads {
				rec := bytes.Replace(recs.Get(seq), []byte(`"status":"queued"`), []byte(`"status":"done"`), 1)
				if err := recs.Put(seq, rec); err != nil {
					return err
				}
				if err := queued.Delete(seq); err != nil {
					return err
				}
			}
			k = len(heads)
			return nil
		})
		return k, err
	})
}

// newDepthQueue is an empty raw queue named name beside store u: on the
// Redis server of a redis:// store; for a bbolt:// one, in a file named
// after the store's (so that endFigure drops it with the store).
func newDepthQueue(ctx context.Context, u, name string) (depthQueue, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	if pu.Scheme == "bbolt" {
		return newRawBoltQueue(pu.Path + "." + name)
	}
	return newRawQueue(ctx, u, name)
}
