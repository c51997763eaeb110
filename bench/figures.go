package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

const noteText = "[finished] make test (exit 0)"

// note is automation input number i for session s: a note when drained
// with nobody watching.
func note(s string, i int) admission.Input {
	return admission.Input{Session: s, Producer: "bench", Identities: []string{fmt.Sprintf("completion:%s:%d", s, i)},
		Text: noteText, Principal: "bench"}
}

// ndjson is n --batch lines of automation input to session s (offset
// keeps identities distinct across calls).
func ndjson(s string, n, offset int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"session":%q,"producer":"bench","identities":["completion:%s:%d"],"text":%q}`+"\n", s, s, offset+i, noteText)
	}
	return b.Bytes()
}

// humans is n --batch lines of human input (turns).
func humans(s string, n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"session":%q,"text":"question %d"}`+"\n", s, i)
	}
	return b.Bytes()
}

func openSession(ctx context.Context, st backend.Store, id string) error {
	_, _, err := st.OpenSession(ctx, backend.OpenSessionRequest{ID: id, Owner: "bench"})
	return err
}

// parallelAdmits admits n inputs to one session from g goroutines, each
// alone (one Service.Admit per input), and returns the rate.
func parallelAdmits(ctx context.Context, store string, g, n int) (float64, error) {
	st, err := openStore(ctx, store)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	svc := service(st)
	if err := openSession(ctx, st, "p"); err != nil {
		return 0, err
	}
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := svc.Admit(ctx, note("p", i)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return perSec(n, time.Since(t0)), firstErr
}

// figure1: bbolt in process, single admits from 64 goroutines, against raw
// bbolt group commit of equivalent records.
func figure1(e *env, sz sizes) ([]Result, error) {
	ctx := context.Background()
	hq, err := parallelAdmits(ctx, e.boltURL(), 64, sz.Admits)
	if err != nil {
		return nil, err
	}
	raw, err := rawGroupCommit(e.fresh("raw")+".db", 64, sz.Admits)
	if err != nil {
		return nil, err
	}
	return []Result{rate("1", "bbolt admits, in process, 64 goroutines", hq, "raw bbolt group commit, 64 goroutines", raw, ">= 0.8")}, nil
}

// batchAdmit runs one `hermesq admit --batch -` of n lines into a new
// session and returns the rate.
func (e *env) batchAdmit(store, session string, n int) (float64, error) {
	if _, err := e.hq(store, nil, "session", "open", session); err != nil {
		return 0, err
	}
	r, err := e.hq(store, ndjson(session, n, 0), "admit", "--batch", "-", "-o", "jsonl")
	if err != nil {
		return 0, err
	}
	if got := bytes.Count(r.out, []byte("\n")); got != n {
		return 0, fmt.Errorf("admit --batch printed %d results for %d lines", got, n)
	}
	return perSec(n, r.wall), nil
}

// figure2: admit --batch of NDJSON lines on bbolt, against raw bbolt at
// 1,000 records per transaction.
func figure2(e *env, sz sizes) ([]Result, error) {
	hq, err := e.batchAdmit(e.boltURL(), "b", sz.Batch)
	if err != nil {
		return nil, err
	}
	raw, err := rawBulk(e.fresh("raw")+".db", sz.Batch)
	if err != nil {
		return nil, err
	}
	return []Result{rate("2", fmt.Sprintf("admit --batch of %d lines, bbolt", sz.Batch), hq, "raw bbolt, 1,000 records/txn", raw, ">= 0.8")}, nil
}

// figure3: one `hermesq admit` process on bbolt against the cobra+viper CLI
// that does nothing (bench/cmd/cobrahello), medians, in time and in minor
// page faults; as information, `hermesq --version`, that CLI, that CLI
// linking hermesq's stores and a hello world linking the producer host,
// each against the one below it. The programs take turns, one run each a
// round, so that a machine whose speed drifts weighs on all of them alike.
func figure3(e *env, sz sizes) ([]Result, error) {
	store := e.boltURL()
	if _, err := e.hq(store, nil, "session", "open", "x"); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "HERMESQ_STORE="+store, "XDG_CONFIG_HOME="+filepath.Join(e.dir, "config"))
	st, err := execRounds(sz.Execs, env, []execProg{
		{argv: []string{e.hello}},
		{argv: []string{e.hermesq, "admit", "x", "--text", "hello"}},
		{argv: []string{e.hermesq, "--version"}},
		{argv: []string{e.cobra, "admit"}},
		{argv: []string{e.stores, "admit"}},
		{argv: []string{e.plugins}},
	})
	if err != nil {
		return nil, err
	}
	hello, admit, version, cobra, stores, plugins := st[0], st[1], st[2], st[3], st[4], st[5]
	n := fmt.Sprintf("median of %d, taking turns", sz.Execs)
	const cobraRef = "cobra+viper CLI doing nothing (bench/cmd/cobrahello)"
	rs := []Result{
		withNote(mk("3", "one `hermesq admit` process, bbolt", ms(admit.wall), "ms", cobraRef, ms(cobra.wall), "<= 1.4"), n),
	}
	if admit.faults > 0 {
		rs = append(rs, withNote(mk("3", "minor page faults of one `hermesq admit`", float64(admit.faults), "faults", cobraRef, float64(cobra.faults), ""), n))
	}
	return append(rs,
		withNote(mk("3", "`hermesq --version`", ms(version.wall), "ms", "hello-world Go binary", ms(hello.wall), ""), n),
		withNote(mk("3", "a cobra+viper CLI doing nothing (bench/cmd/cobrahello)", ms(cobra.wall), "ms", "hello-world Go binary", ms(hello.wall), ""), n),
		withNote(mk("3", "that CLI linking hermesq's two stores (bench/cmd/storehello)", ms(stores.wall), "ms", cobraRef, ms(cobra.wall), ""), n),
		withNote(mk("3", "hello world linking the producer host (bench/cmd/producerhello)", ms(plugins.wall), "ms", "hello-world Go binary", ms(hello.wall), ""), n),
	), nil
}

func withNote(r Result, note string) Result { r.Note = note; return r }

// figure4: Redis single admits from 8 callers against asynq enqueue with
// TaskID from 8 goroutines; admit --batch on Redis against redis-benchmark
// running an equivalent admit script with 16-deep pipelines.
func figure4(e *env, sz sizes) ([]Result, error) { return redisAdmits(e, sz, "everysec", "4") }

func redisAdmits(e *env, sz sizes, kind, fig string) ([]Result, error) {
	ctx := context.Background()
	u, err := e.redisURL(kind)
	if err != nil {
		return nil, err
	}
	srv, _ := e.redis(kind)
	// The CPU each side spends per admission, the server's (INFO cpu) and
	// this process's (the client's), shows which one holds a rate back.
	var hq, aq float64
	hqServer, hqClient, err := srv.cpuOf(func() (err error) { hq, err = parallelAdmits(ctx, u, 8, sz.Admits); return })
	if err != nil {
		return nil, err
	}
	aqServer, aqClient, err := srv.cpuOf(func() (err error) { aq, err = asynqEnqueue(srv.addr, 8, sz.Admits); return })
	if err != nil {
		return nil, err
	}
	perAdmit := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(sz.Admits) }
	u, _ = e.redisURL(kind)
	batch, err := e.batchAdmit(u, "b", sz.Batch)
	if err != nil {
		return nil, err
	}
	rb, err := redisBenchmarkAdmit(srv, sz.Batch)
	if err != nil {
		return nil, err
	}
	t1, t2 := ">= 1.0", ">= 0.8"
	suffix := ""
	if fig == "8" {
		t1, t2, suffix = "", "", ", appendfsync always"
	}
	return []Result{
		rate(fig, "Redis admits, in process, 8 callers"+suffix, hq, "asynq enqueue (TaskID), 8 goroutines", aq, t1),
		mk(fig, "Redis server CPU per admission of those 8 callers"+suffix, perAdmit(hqServer), "µs",
			"asynq enqueue (INFO cpu)", perAdmit(aqServer), ""),
		mk(fig, "client CPU per admission of those 8 callers"+suffix, perAdmit(hqClient), "µs",
			"asynq enqueue (getrusage of the bench process)", perAdmit(aqClient), ""),
		rate(fig, fmt.Sprintf("admit --batch of %d lines, Redis%s", sz.Batch, suffix), batch, "redis-benchmark admit script, -P 16", rb, t2),
	}, nil
}

// drainCLI queues n notes with admit --batch and drains them with one
// `hermesq drain` process; it returns the drain's rate and peak RSS.
func (e *env) drainCLI(store, session string, n int) (float64, run, error) {
	if _, err := e.batchAdmit(store, session, n); err != nil {
		return 0, run{}, err
	}
	r, err := e.hq(store, nil, "drain", session)
	if err != nil {
		return 0, r, err
	}
	if notes := bytes.Count(r.out, []byte("\nnote ")) + boolInt(bytes.HasPrefix(r.out, []byte("note "))); notes != n {
		return 0, r, fmt.Errorf("drain wrote %d notes, want %d", notes, n)
	}
	return perSec(n, r.wall), r, nil
}

// figure5: draining notes with nobody watching: bbolt against raw bbolt at
// 1,000 records per transaction, Redis against asynq's no-op processing at
// concurrency 8.
func figure5(e *env, sz sizes) ([]Result, error) {
	hq, _, err := e.drainCLI(e.boltURL(), "n", sz.Notes)
	if err != nil {
		return nil, err
	}
	raw, err := rawBulk(e.fresh("raw")+".db", sz.Notes)
	if err != nil {
		return nil, err
	}
	rs := []Result{rate("5", fmt.Sprintf("drain of %d notes, bbolt", sz.Notes), hq, "raw bbolt, 1,000 records/txn", raw, ">= 0.4")}
	r, err := redisDrain(e, sz, "everysec", "5")
	return append(rs, r...), err
}

func redisDrain(e *env, sz sizes, kind, fig string) ([]Result, error) {
	u, err := e.redisURL(kind)
	if err != nil {
		return nil, err
	}
	hq, _, err := e.drainCLI(u, "n", sz.Notes)
	if err != nil {
		return nil, err
	}
	srv, _ := e.redis(kind)
	aq, err := asynqProcess(srv.addr, 8, sz.Notes)
	if err != nil {
		return nil, err
	}
	t, suffix := ">= 2.0", ""
	if fig == "8" {
		t, suffix = "", ", appendfsync always"
	}
	return []Result{rate(fig, fmt.Sprintf("drain of %d notes, Redis%s", sz.Notes, suffix), hq, "asynq no-op processing, concurrency 8", aq, t)}, nil
}

// figure6: per-item admit and drain cost with a deep queue against a
// shallow one, on both stores; the peak RSS of draining the deep queue.
func figure6(e *env, sz sizes) ([]Result, error) {
	var rs []Result
	for _, st := range []string{"bbolt", "Redis"} {
		cost := map[int][2]time.Duration{}
		raw := map[int][2]time.Duration{}
		var deepURL string
		for _, depth := range []int{sz.DepthSmall, sz.DepthBig} {
			u, err := e.storeURL(st)
			if err != nil {
				return nil, err
			}
			p, err := depthProbe(u, depth, sz.DepthProbe)
			if err != nil {
				return nil, fmt.Errorf("%s depth %d: %w", st, depth, err)
			}
			cost[depth] = [2]time.Duration{p.admit, p.drain}
			raw[depth] = [2]time.Duration{p.rawAdmit, p.rawDrain}
			deepURL = u
		}
		small, big := cost[sz.DepthSmall], cost[sz.DepthBig]
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
		ref := fmt.Sprintf("with %d queued", sz.DepthSmall)
		rs = append(rs,
			mk("6", fmt.Sprintf("%s admit cost per item, %d queued", st, sz.DepthBig), us(big[0]), "µs", ref, us(small[0]), "<= 1.2"),
			mk("6", fmt.Sprintf("%s drain cost per item, %d queued", st, sz.DepthBig), us(big[1]), "µs", ref, us(small[1]), "<= 1.2"))
		// What depth costs the store itself, in the same run: the same
		// shape of queue without hermesq (plain keys of the same Redis
		// server; a bbolt file beside the store's).
		rsmall, rbig := raw[sz.DepthSmall], raw[sz.DepthBig]
		admitNote, drainNote := "the admit-shaped script of figure 4, one call each", fmt.Sprintf("a drain-shaped script, %d heads a call", rawDrainRun)
		if st == "bbolt" {
			admitNote, drainNote = "the records of figures 1 and 2, one a commit", fmt.Sprintf("%d heads a commit", rawDrainRun)
		}
		rs = append(rs,
			withNote(mk("6", fmt.Sprintf("raw %s admit cost per item, %d queued", st, sz.DepthBig), us(rbig[0]), "µs", ref, us(rsmall[0]), ""), admitNote),
			withNote(mk("6", fmt.Sprintf("raw %s drain cost per item, %d queued", st, sz.DepthBig), us(rbig[1]), "µs", ref, us(rsmall[1]), ""), drainNote))
		// The target restated against that floor: depth may cost hermesq
		// 1.2 times what it costs the store (the raw queue's ratio), and
		// 1.2× whenever it costs the store nothing.
		for k, what := range []string{"admit", "drain"} {
			rs = append(rs, mk("6", fmt.Sprintf("%s %s: its cost ratio at %d queued, against the raw queue's", st, what, sz.DepthBig),
				ratio(big[k], small[k]), "×", "raw queue's ratio (at least 1)", max(1, ratio(rbig[k], rsmall[k])), "<= 1.2"))
		}
		// Drain what is left of the deep queue in one process.
		r, err := e.hq(deepURL, nil, "drain", "d")
		if err != nil {
			return nil, err
		}
		rs = append(rs, mk("6", fmt.Sprintf("%s peak RSS of one drain of %d", st, sz.DepthBig), float64(r.maxRSS)/(1<<20), "MiB",
			"limit", 100, "<= 1.0"))
	}
	return rs, nil
}

// ratio is a / b (0 when b is).
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// depthCost is what one depth of figure 6 costs per item: hermesq's
// single admits and drain of notes, and the same of the store's raw queue
// (rawQueue, rawBoltQueue).
type depthCost struct{ admit, drain, rawAdmit, rawDrain time.Duration }

// depthRounds is how many rounds depthProbe splits its probe into, taking
// turns with the raw queue, so that both are measured in the same state
// of the server and the machine (after filling a million, a server writes
// its append-only file back for a while, and a probe measured after the
// other's would meet another state); within a round the two take turns at
// going first.
const depthRounds = 4

// depthProbe fills session d of store u to depth, and a raw queue of the
// same store (newDepthQueue), then measures the mean cost of probe single
// admits and of draining probe notes, in depthRounds rounds, each of them
// taking turns with the raw queue. On Redis the probe starts once the
// server has finished rewriting its append-only file (awaitAOFRewrite),
// which filling it may have started.
func depthProbe(u string, depth, probe int) (depthCost, error) {
	var c depthCost
	ctx := context.Background()
	st, err := openStore(ctx, u)
	if err != nil {
		return c, err
	}
	defer st.Close()
	svc := service(st)
	if err := openSession(ctx, st, "d"); err != nil {
		return c, err
	}
	// Session d is drained in process here and then by a hermesq drain
	// process, which acts as the OS user: that user is its drainer.
	me, err := user.Current()
	if err != nil {
		return c, err
	}
	if err := st.Grant(ctx, "d", backend.Grant{Principal: me.Username, Role: backend.RoleDrainer}); err != nil {
		return c, err
	}
	if err := fillNotes(ctx, svc, "d", depth); err != nil {
		return c, err
	}
	q, err := newDepthQueue(ctx, u, fmt.Sprintf("rawdepth%d", depth))
	if err != nil {
		return c, err
	}
	defer q.close()
	if err := q.fill(ctx, depth); err != nil {
		return c, err
	}
	if err := awaitAOFRewrite(ctx, u); err != nil {
		return c, err
	}
	n := probe / depthRounds
	next := depth
	// inTurns runs hermesq's part and the raw queue's depthRounds times,
	// taking turns at going first (ABBA): whichever goes first meets the
	// store first after the fill or after the round before.
	inTurns := func(hq, raw func() error) error {
		for r := 0; r < depthRounds; r++ {
			first, second := hq, raw
			if r%2 == 1 {
				first, second = raw, hq
			}
			if err := first(); err != nil {
				return err
			}
			if err := second(); err != nil {
				return err
			}
		}
		return nil
	}
	err = inTurns(func() error {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if _, err := svc.Admit(ctx, note("d", next)); err != nil {
				return err
			}
			next++
		}
		c.admit += time.Since(t0)
		return nil
	}, func() error {
		d, err := q.admit(ctx, n)
		c.rawAdmit += d
		return err
	})
	if err != nil {
		return c, err
	}
	err = inTurns(func() error {
		t0 := time.Now()
		rep, err := svc.Drain(ctx, "d", admission.DrainOptions{Principal: me.Username, Max: n})
		if err != nil {
			return err
		}
		if rep.Notes != n {
			return fmt.Errorf("drained %d notes, want %d", rep.Notes, n)
		}
		c.drain += time.Since(t0)
		return nil
	}, func() error {
		d, err := q.drain(ctx, n)
		c.rawDrain += d
		return err
	})
	if err != nil {
		return c, err
	}
	all := time.Duration(n * depthRounds)
	c.admit, c.drain, c.rawAdmit, c.rawDrain = c.admit/all, c.drain/all, c.rawAdmit/all, c.rawDrain/all
	return c, nil
}

// fillNotes queues n notes in session s, 1,000 an AdmitBatch.
func fillNotes(ctx context.Context, svc *admission.Service, s string, n int) error {
	const chunk = 1000
	ins := make([]admission.Input, 0, chunk)
	for i := 0; i < n; i += chunk {
		ins = ins[:0]
		for j := i; j < i+chunk && j < n; j++ {
			ins = append(ins, note(s, j))
		}
		if _, err := svc.AdmitBatch(ctx, ins); err != nil {
			return err
		}
	}
	return nil
}

// figure8: the disk's fsync rate, and the Redis figures with appendfsync
// always (no targets).
func figure8(e *env, sz sizes) ([]Result, error) {
	f, err := fsyncRate(e.fresh("fsync"), sz.FsyncWindow)
	if err != nil {
		return nil, err
	}
	rs := []Result{rate("8", "disk fsync rate (4 KiB write + fdatasync)", f, "", 0, "")}
	r, err := redisAdmits(e, sz, "always", "8")
	if err != nil {
		return nil, err
	}
	rs = append(rs, r...)
	r, err = redisDrain(e, sz, "always", "8")
	return append(rs, r...), err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// awaitAOFRewrite waits until the Redis server of store URL u has no
// append-only-file rewrite running or scheduled (a no-op for bbolt). The
// fill of a deep queue grows the file past Redis's rewrite threshold, and
// the rewrite (a forked child writing the whole data set, its parent paying
// copy-on-write faults) would otherwise land in the probe: the cost of
// Redis's persistence catching up, not of the depth.
func awaitAOFRewrite(ctx context.Context, u string) error {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "redis" {
		return err
	}
	c := goredis.NewClient(&goredis.Options{Addr: pu.Host})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("redis INFO persistence: %w", err)
		}
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis append-only file rewrite still running after 5 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
