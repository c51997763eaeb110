package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// drainScript is the core of a notes drain in Redis, as admitScript is of
// an admit: take up to ARGV[1] heads of the queue, read each record and
// write it back settled, and take them off the queue.
const drainScript = `
local seqs = redis.call('ZRANGE', KEYS[4], 0, tonumber(ARGV[1]) - 1)
for _, seq in ipairs(seqs) do
  local rec = redis.call('HGET', KEYS[2], seq)
  redis.call('HSET', KEYS[2], seq, (string.gsub(rec, '"status":"queued"', '"status":"done"')))
end
if #seqs > 0 then redis.call('ZREM', KEYS[4], unpack(seqs)) end
return #seqs`

// rawDrainRun is how many heads one drainScript call settles: what one
// drain step of hermesq settles together (pkg/admission, maxRun).
const rawDrainRun = 512

// rawQueue is figure 6's reference on Redis: the same shape of queue as
// hermesq's (a hash of records, a sorted set of the queue, the identities)
// on plain keys of the same server, with none of hermesq's rules, so what
// depth costs it is what depth costs the server. It admits with
// admitScript and drains with drainScript.
type rawQueue struct {
	c                  *goredis.Client
	keys               []string
	admitSHA, drainSHA string
	next               int // the next record to admit
}

// newRawQueue is an empty raw queue named name on the server of store u.
func newRawQueue(ctx context.Context, u, name string) (*rawQueue, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	q := &rawQueue{c: goredis.NewClient(&goredis.Options{Addr: pu.Host})}
	q.keys = []string{name + ":{s}:session", name + ":{s}:records", name + ":{s}:identities", name + ":{s}:queued"}
	if q.admitSHA, err = q.c.ScriptLoad(ctx, admitScript).Result(); err == nil {
		q.drainSHA, err = q.c.ScriptLoad(ctx, drainScript).Result()
	}
	if err != nil {
		q.c.Close()
		return nil, err
	}
	return q, nil
}

func (q *rawQueue) close() { q.c.Close() }

func (q *rawQueue) admitOne(ctx context.Context, p goredis.Cmdable) *goredis.Cmd {
	_, rec, ident := rawRecord(q.next)
	q.next++
	return p.EvalSha(ctx, q.admitSHA, q.keys, ident, rec)
}

// fill admits n in pipelines of 1,000.
func (q *rawQueue) fill(ctx context.Context, n int) error {
	for i := 0; i < n; i += 1000 {
		p := q.c.Pipeline()
		for j := i; j < min(i+1000, n); j++ {
			q.admitOne(ctx, p)
		}
		if _, err := p.Exec(ctx); err != nil {
			return fmt.Errorf("fill the raw queue: %w", err)
		}
	}
	return nil
}

// admit admits n, one call each, and returns the time they took.
func (q *rawQueue) admit(ctx context.Context, n int) (time.Duration, error) {
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := q.admitOne(ctx, q.c).Err(); err != nil {
			return 0, fmt.Errorf("raw admit: %w", err)
		}
	}
	return time.Since(t0), nil
}

// drain drains n from the head, rawDrainRun a call, and returns the time
// it took.
func (q *rawQueue) drain(ctx context.Context, n int) (time.Duration, error) {
	return drainRuns(n, func(most int) (int, error) {
		return q.c.EvalSha(ctx, q.drainSHA, q.keys, most).Int()
	})
}

// drainRuns drains n from the head of a raw queue by runs of at most
// rawDrainRun (run drains up to most heads and says how many), and returns
// the time it took.
func drainRuns(n int, run func(most int) (int, error)) (time.Duration, error) {
	t0 := time.Now()
	for left := n; left > 0; {
		k, err := run(min(left, rawDrainRun))
		if err != nil {
			return 0, fmt.Errorf("raw drain: %w", err)
		}
		if k == 0 {
			return 0, fmt.Errorf("raw drain: the queue ran out with %d to go", left)
		}
		left -= k
	}
	return time.Since(t0), nil
}
