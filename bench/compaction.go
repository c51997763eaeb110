package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/admission"
)

// slowlogFloor is the slowlog-log-slower-than (µs) the compaction figure
// sets: low enough to see the longest script call of a compaction that
// keeps within its 10 ms limit.
const slowlogFloor = 1000

// figure9: compaction is linear. `hermesq compact` of CompactBig settled
// admissions against CompactSmall, per admission, on each store; on Redis
// the longest script call of either compaction (SLOWLOG) against 10 ms.
func figure9(e *env, sz sizes) ([]Result, error) {
	var rs []Result
	for _, st := range []string{"bbolt", "Redis"} {
		cost := map[int]time.Duration{}
		var slow slowCalls
		for _, n := range []int{sz.CompactSmall, sz.CompactBig} {
			u, err := e.storeURL(st)
			if err != nil {
				return nil, err
			}
			d, sc, err := e.compact(u, n)
			if err != nil {
				return nil, fmt.Errorf("%s, %d settled: %w", st, n, err)
			}
			cost[n] = d / time.Duration(n)
			slow.add(sc)
		}
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
		rs = append(rs, mk("9", fmt.Sprintf("%s compact cost per admission, %d settled", st, sz.CompactBig),
			us(cost[sz.CompactBig]), "µs", fmt.Sprintf("with %d settled", sz.CompactSmall), us(cost[sz.CompactSmall]), "<= 1.2"))
		if st == "Redis" {
			r := mk("9", "Redis longest script call of a compaction (SLOWLOG)", us(slow.longest), "µs", "limit", 10000, "<= 1.0")
			r.Note = slow.String()
			rs = append(rs, r)
		}
	}
	return rs, nil
}

// compact settles n admissions in session c of store u (queued with
// AdmitBatch and drained as notes, in process), then times one `hermesq
// compact` whose cutoff takes them all. On Redis it also returns what the
// slow log and the fork count say of the compaction's script calls.
func (e *env) compact(u string, n int) (wall time.Duration, slow slowCalls, err error) {
	ctx := context.Background()
	if err := settleNotes(ctx, u, "c", n); err != nil {
		return 0, slow, err
	}
	var rc *goredis.Client
	var forks int64
	if pu, _ := url.Parse(u); pu != nil && pu.Scheme == "redis" {
		if err := awaitAOFRewrite(ctx, u); err != nil {
			return 0, slow, err
		}
		rc = goredis.NewClient(&goredis.Options{Addr: pu.Host})
		defer rc.Close()
		if err := resetSlowlog(ctx, rc); err != nil {
			return 0, slow, err
		}
		if forks, err = totalForks(ctx, rc); err != nil {
			return 0, slow, err
		}
	}
	time.Sleep(20 * time.Millisecond) // every settled time is before the cutoff
	r, err := e.hq(u, nil, "compact", "--older-than", "10ms")
	if err != nil {
		return 0, slow, err
	}
	var got int
	for _, l := range strings.Split(string(r.out), "\n") {
		if strings.Contains(l, "admissions settled before") {
			_, _ = fmt.Sscanf(l, "compacted %d admissions", &got)
		}
	}
	if got != n {
		return 0, slow, fmt.Errorf("compact removed %d admissions, want %d: %q", got, n, firstLines(string(r.out)))
	}
	if rc != nil {
		if slow, err = scriptCalls(ctx, rc); err != nil {
			return 0, slow, err
		}
		after, err := totalForks(ctx, rc)
		if err != nil {
			return 0, slow, err
		}
		slow.forks = after - forks
	}
	return r.wall, slow, nil
}

// settleNotes queues n notes in a new session s of store u and drains
// them, in process: n settled admissions.
func settleNotes(ctx context.Context, u, s string, n int) error {
	st, err := openStore(ctx, u)
	if err != nil {
		return err
	}
	defer st.Close()
	svc := service(st)
	if err := openSession(ctx, st, s); err != nil {
		return err
	}
	if err := fillNotes(ctx, svc, s, n); err != nil {
		return err
	}
	rep, err := svc.Drain(ctx, s, admission.DrainOptions{Principal: "bench", NoExecuted: true})
	if err != nil {
		return err
	}
	if rep.Notes != n {
		return fmt.Errorf("drained %d notes, want %d", rep.Notes, n)
	}
	return nil
}

// resetSlowlog makes the server log every command slower than
// slowlogFloor µs, keeping enough entries for a whole compaction, and
// empties the log.
func resetSlowlog(ctx context.Context, c *goredis.Client) error {
	if err := c.ConfigSet(ctx, "slowlog-log-slower-than", fmt.Sprint(slowlogFloor)).Err(); err != nil {
		return fmt.Errorf("redis CONFIG SET slowlog-log-slower-than: %w", err)
	}
	if err := c.ConfigSet(ctx, "slowlog-max-len", "100000").Err(); err != nil {
		return fmt.Errorf("redis CONFIG SET slowlog-max-len: %w", err)
	}
	return c.Do(ctx, "SLOWLOG", "RESET").Err()
}

// slowCalls is what the server's slow log and fork count tell of the
// script calls of compactions: the longest (and its scan, the most
// admissions it could examine, its last argument), how many were logged
// (those over slowlogFloor µs), and how many times the server forked
// meanwhile (an append-only file rewrite: after a fork, each page the
// server writes is first copied).
type slowCalls struct {
	longest time.Duration
	scan    string
	n       int
	forks   int64
}

func (s *slowCalls) add(o slowCalls) {
	if o.longest > s.longest {
		s.longest, s.scan = o.longest, o.scan
	}
	s.n += o.n
	s.forks += o.forks
}

func (s slowCalls) String() string {
	t := fmt.Sprintf("%d script calls over %d µs; %d server forks during the compactions", s.n, slowlogFloor, s.forks)
	if s.scan != "" {
		t += "; the longest call's scan " + s.scan
	}
	return t
}

// scriptCalls reads the script calls (EVAL, EVALSHA, FCALL and their
// read-only forms) in the server's slow log.
func scriptCalls(ctx context.Context, c *goredis.Client) (slowCalls, error) {
	var s slowCalls
	entries, err := c.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return s, fmt.Errorf("redis SLOWLOG GET: %w", err)
	}
	for _, e := range entries {
		if len(e.Args) == 0 {
			continue
		}
		switch strings.ToLower(e.Args[0]) {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			if e.Duration > s.longest {
				s.longest, s.scan = e.Duration, e.Args[len(e.Args)-1]
			}
			s.n++
		}
	}
	return s, nil
}

// totalForks is the server's total_forks (INFO stats).
func totalForks(ctx context.Context, c *goredis.Client) (int64, error) {
	info, err := c.Info(ctx, "stats").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO stats: %w", err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "total_forks:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis INFO stats: no total_forks")
}
