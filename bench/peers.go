package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// rawRecord is a record of the size hermesq writes for one queued note,
// with the writes hermesq needs to find it again: the record by seq, the
// queued index, the identity index.
func rawRecord(i int) (seq, rec, identity []byte) {
	seq = binary.BigEndian.AppendUint64(nil, uint64(i+1))
	a := backend.Admission{
		ID: fmt.Sprintf("%032x", i), Session: "raw", Seq: uint64(i + 1), Kind: backend.KindAutomation,
		Producer: "bench", Principal: "bench", Identities: []string{fmt.Sprintf("completion:raw:%d", i)},
		Payload: json.RawMessage(`{"text":"` + noteText + `"}`), PinnedTarget: "raw",
		Status: backend.StatusQueued, AdmittedAt: time.Now(),
	}
	rec, _ = json.Marshal(a)
	return seq, rec, []byte(a.Identities[0])
}

var rawBuckets = [][]byte{[]byte("records"), []byte("queued"), []byte("identities")}

func rawOpen(path string) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range rawBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	return db, err
}

func rawPut(tx *bolt.Tx, i int) error {
	seq, rec, id := rawRecord(i)
	if err := tx.Bucket(rawBuckets[0]).Put(seq, rec); err != nil {
		return err
	}
	if err := tx.Bucket(rawBuckets[1]).Put(seq, nil); err != nil {
		return err
	}
	return tx.Bucket(rawBuckets[2]).Put(id, seq)
}

// rawBulk writes n records, 1,000 per transaction, and returns the rate.
func rawBulk(path string, n int) (float64, error) {
	db, err := rawOpen(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	t0 := time.Now()
	if err := rawFill(db, n); err != nil {
		return 0, err
	}
	return perSec(n, time.Since(t0)), nil
}

// rawFill writes records 0 to n-1, 1,000 per transaction.
func rawFill(db *bolt.DB, n int) error {
	for i := 0; i < n; i += 1000 {
		err := db.Update(func(tx *bolt.Tx) error {
			for j := i; j < i+1000 && j < n; j++ {
				if err := rawPut(tx, j); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rawGroupCommit writes n records from g goroutines, one record each call;
// a committer writes whatever is waiting in one transaction (group commit)
// and returns the rate.
func rawGroupCommit(path string, g, n int) (float64, error) {
	db, err := rawOpen(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	type req struct {
		i    int
		done chan error
	}
	reqs := make(chan req, g)
	go func() {
		for r := range reqs {
			batch := []req{r}
		more:
			for {
				select {
				case r2, ok := <-reqs:
					if !ok {
						break more
					}
					batch = append(batch, r2)
				default:
					break more
				}
			}
			err := db.Update(func(tx *bolt.Tx) error {
				for _, r := range batch {
					if err := rawPut(tx, r.i); err != nil {
						return err
					}
				}
				return nil
			})
			for _, r := range batch {
				r.done <- err
			}
		}
	}()
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				reqs <- req{i, done}
				if err := <-done; err != nil {
					firstErr.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	close(reqs)
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return perSec(n, d), nil
}

// asynqEnqueue enqueues n tasks with a TaskID from g goroutines.
func asynqEnqueue(addr string, g, n int) (float64, error) {
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 32})
	defer c.Close()
	payload := []byte(`{"text":"` + noteText + `"}`)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	run := fmt.Sprintf("%d", time.Now().UnixNano())
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
				_, err := c.Enqueue(asynq.NewTask("note", payload), asynq.TaskID(run+"-"+strconv.Itoa(i)), asynq.Queue("enq"+run))
				if err != nil {
					firstErr.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return perSec(n, time.Since(t0)), nil
}

// asynqProcess enqueues n tasks, then measures an asynq server at
// concurrency g processing them with a no-op handler.
func asynqProcess(addr string, g, n int) (float64, error) {
	q := fmt.Sprintf("proc%d", time.Now().UnixNano())
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 32})
	payload := []byte(`{"text":"` + noteText + `"}`)
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				_, _ = c.Enqueue(asynq.NewTask("note", payload), asynq.TaskID(q+"-"+strconv.Itoa(i)), asynq.Queue(q))
			}
		}()
	}
	wg.Wait()
	_ = c.Close()
	var done atomic.Int64
	finished := make(chan struct{})
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: addr, PoolSize: 32}, asynq.Config{
		Concurrency: g, Queues: map[string]int{q: 1}, LogLevel: asynq.FatalLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc("note", func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(n) {
			close(finished)
		}
		return nil
	})
	t0 := time.Now()
	if err := srv.Start(mux); err != nil {
		return 0, err
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		srv.Shutdown()
		return 0, fmt.Errorf("asynq processed %d of %d tasks in 10 minutes", done.Load(), n)
	}
	d := time.Since(t0)
	srv.Shutdown()
	return perSec(n, d), nil
}

// admitScript is the core of an admit in Redis, for redis-benchmark: take
// the identity (refuse a duplicate), the next seq, the record, the queue.
const admitScript = `
if redis.call('HSETNX', KEYS[3], ARGV[1], '') == 0 then return 0 end
local seq = redis.call('HINCRBY', KEYS[1], 'next_seq', 1)
redis.call('HSET', KEYS[3], ARGV[1], seq)
redis.call('HSET', KEYS[2], seq, ARGV[2])
redis.call('ZADD', KEYS[4], seq, seq)
return seq`

// redisBenchmarkAdmit runs redis-benchmark with the admit script, n calls
// on one connection in 16-deep pipelines, and returns its rate.
func redisBenchmarkAdmit(s *redisServer, n int) (float64, error) {
	c := s.client()
	defer c.Close()
	sha, err := c.ScriptLoad(context.Background(), admitScript).Result()
	if err != nil {
		return 0, err
	}
	_, rec, _ := rawRecord(0)
	host, port, _ := strings.Cut(s.addr, ":")
	cmd := exec.Command("redis-benchmark", "-h", host, "-p", port, "-c", "1", "-P", "16", "-n", strconv.Itoa(n),
		"-r", "1000000000", "-q", "evalsha", sha, "4", "rb:{s}:session", "rb:{s}:records", "rb:{s}:identities", "rb:{s}:queued",
		"completion:rb:__rand_int__", string(rec))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	// "evalsha …: 123456.79 requests per second, p50=…" (after \r progress).
	text := string(out)
	i := strings.LastIndex(text, " requests per second")
	if i < 0 {
		return 0, fmt.Errorf("redis-benchmark: no rate in %q", text)
	}
	j := strings.LastIndexAny(text[:i], " \r\t")
	return strconv.ParseFloat(text[j+1:i], 64)
}

// fsyncRate writes 4 KiB at the start of a file and fdatasyncs it, over and
// over for window, and returns the rate.
func fsyncRate(path string, window time.Duration) (float64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	n := 0
	t0 := time.Now()
	for time.Since(t0) < window {
		if err := writeSync(f, buf, n); err != nil {
			return 0, err
		}
		n++
	}
	return perSec(n, time.Since(t0)), nil
}

// fsyncCost is the median cost of n bare durable writes: 4 KiB written at
// the start of a file and fdatasynced, as fsyncRate does.
func fsyncCost(path string, n int) (time.Duration, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := writeSync(f, buf, i); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return median(ds), nil
}

// writeSync writes buf (its first byte set from i, so each write changes
// the page) at the start of f and fdatasyncs it.
func writeSync(f *os.File, buf []byte, i int) error {
	buf[0] = byte(i)
	if _, err := f.WriteAt(buf, 0); err != nil {
		return err
	}
	return fdatasync(f)
}

// scatterPages is how many 4 KiB pages scatteredSyncCost writes before
// each fdatasync: about what a turn's commit writes
// (BenchmarkCommitPages in plugins/storage/bbolt).
const scatterPages = 15

// scatteredSyncCost is the median cost of n rounds of scatterPages 4 KiB
// writes and one fdatasync, the pages adjacent (one run) or apart (each
// page a run of its own, as bbolt's copy-on-write tends to place a
// commit's pages), in a file of 16 MiB written and synced first: on many
// disks each run of dirty pages is a write of its own for the fdatasync.
func scatteredSyncCost(path string, n int, apart bool) (time.Duration, error) {
	const filePages = 4096
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, filePages*4096), 0); err != nil {
		return 0, err
	}
	if err := fdatasync(f); err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		for j := 0; j < scatterPages; j++ {
			page := (i*scatterPages)%(filePages-scatterPages) + j // one run, never wrapping
			if apart {
				page = (i*7 + j*131) % filePages // 131 pages apart, moving on each round
			}
			buf[0] = byte(i)
			if _, err := f.WriteAt(buf, int64(page)*4096); err != nil {
				return 0, err
			}
		}
		if err := fdatasync(f); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return median(ds), nil
}

// commitCost is the median cost of n raw bbolt transactions that each put
// one small record (the size hermesq writes for a queued note) in a fresh
// file opened as hermesq opens its store: one durable commit, which bbolt
// makes with two fdatasyncs (the data pages, then the meta page).
func commitCost(path string, n int) (time.Duration, error) {
	db, err := rawOpen(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		seq, rec, _ := rawRecord(i)
		t0 := time.Now()
		err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(rawBuckets[0]).Put(seq, rec) })
		if err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return median(ds), nil
}
