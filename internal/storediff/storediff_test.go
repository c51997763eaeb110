package storediff_test

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/internal/storediff"
	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
	redisstore "github.com/hermesq/hermesq/plugins/storage/redis"
)

var (
	seedFlag = flag.Uint64("diff.seed", 0, "replay the sequence of this seed (HERMESQ_DIFF_SEED)")
	keepFlag = flag.String("diff.keep", "", "with -diff.seed: only the ops at these indexes, comma-separated (a shrunk sequence)")
	nFlag    = flag.Int("diff.n", 0, "sequences to run (HERMESQ_DIFF_N); 0: the bounded default")
	lenFlag  = flag.Int("diff.len", 0, "operations a sequence (HERMESQ_DIFF_LEN); 0: the default")
	opsFlag  = flag.String("diff.ops", "", "only these kinds of operation, comma-separated (HERMESQ_DIFF_OPS); empty: all")
)

func envOr(name string, v uint64) uint64 {
	if v != 0 {
		return v
	}
	if s := os.Getenv(name); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err == nil {
			return n
		}
	}
	return 0
}

func openRedis(t testing.TB, raw string) backend.Store {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := redisstore.Opener(ctx, u, backend.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", backend.Redact(raw), err)
	}
	return s
}

func stores(t *testing.T) []storediff.Store {
	srv := redistest.Start(t)
	cl := redistest.StartCluster(t)
	return []storediff.Store{
		{Name: "bbolt", New: func(t testing.TB) backend.Store {
			s, err := boltstore.Open(context.Background(), filepath.Join(t.TempDir(), fmt.Sprintf("d%d.db", time.Now().UnixNano())), backend.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{Name: "redis", New: func(t testing.TB) backend.Store { return openRedis(t, srv.FreshURL()) }},
		{Name: "redis-cluster", New: func(t testing.TB) backend.Store { return openRedis(t, cl.FreshURL()) }},
	}
}

// TestDifferential applies random sequences of operations to bbolt, Redis
// and Redis Cluster, compares every reply and the final exports, and
// judges them by the reference model. A failure prints the shrunk
// sequence and the command that replays it.
// defaultBase is the first seed of the default run.
const defaultBase = 1796408649725566038

func TestDifferential(t *testing.T) {
	ss := stores(t)
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
	}
	n := int(envOr("HERMESQ_DIFF_N", uint64(*nFlag)))
	if n == 0 {
		// Bounded: about 30 s on two busy cores (120 sequences of 40
		// operations on each of three stores); HERMESQ_DIFF_N for more.
		n = 120
		if raceEnabled {
			n = 30
		}
	}
	length := int(envOr("HERMESQ_DIFF_LEN", uint64(*lenFlag)))
	if length == 0 {
		length = 40
	}
	fails := func(ops []storediff.Op) *storediff.Failure {
		return storediff.Compare(names, storediff.Run(t, ss, ops), ops)
	}
	steps, judged := 0, 0
	only := *opsFlag
	if only == "" {
		only = os.Getenv("HERMESQ_DIFF_OPS")
	}
	var kinds []string
	if only != "" {
		kinds = strings.Split(only, ",")
	}
	replay := ""
	if only != "" {
		replay = " -diff.ops=" + only
	}
	check := func(seed uint64, keep []int) bool {
		ops := storediff.GenerateOnly(seed, length, kinds)
		if keep != nil {
			ops = storediff.Pick(ops, keep)
		}
		f, j := storediff.CompareCount(names, storediff.Run(t, ss, ops), ops)
		steps += len(ops)
		judged += j
		if f == nil {
			return true
		}
		if keep == nil {
			keep = storediff.Shrink(ops, func(o []storediff.Op) bool { return fails(o) != nil })
			ops = storediff.Pick(ops, keep)
			f = fails(ops)
		}
		ks := make([]string, len(keep))
		for i, k := range keep {
			ks[i] = strconv.Itoa(k)
		}
		traces := storediff.Run(t, ss, ops)
		var b strings.Builder
		for i, tr := range traces {
			fmt.Fprintf(&b, "--- %s:\n%s", names[i], tr)
		}
		t.Errorf("seed %d: the stores diverge on this sequence (shrunk to %d ops):\n%s\n%s\n\nreplay: go test -count=1 -run TestDifferential ./internal/storediff -diff.seed=%d -diff.len=%d%s -diff.keep=%s\n\ntraces:\n%s",
			seed, len(ops), storediff.Listing(ops, keep), f.Detail, seed, length, replay, strings.Join(ks, ","), b.String())
		return false
	}
	if seed := envOr("HERMESQ_DIFF_SEED", *seedFlag); seed != 0 {
		var keep []int
		if *keepFlag != "" {
			for _, s := range strings.Split(*keepFlag, ",") {
				k, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("-diff.keep: %v", err)
				}
				keep = append(keep, k)
			}
		}
		check(seed, keep)
		return
	}
	// The default run is the same every time, so a test run passes or
	// fails for the code alone; HERMESQ_DIFF_BASE=time explores from a
	// new seed (a longer run: HERMESQ_DIFF_N, HERMESQ_DIFF_LEN).
	base := uint64(defaultBase)
	switch s := os.Getenv("HERMESQ_DIFF_BASE"); s {
	case "":
	case "time":
		base = uint64(time.Now().UnixNano())
	default:
		var err error
		if base, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("HERMESQ_DIFF_BASE=%q: want a seed or time", s)
		}
	}
	failed := 0
	for i := range n {
		if !check(base+uint64(i), nil) {
			if failed++; failed >= 3 {
				return
			}
		}
	}
	t.Logf("%d sequences from seed %d, %d operations on each of %s; the model judged %d of them",
		n, base, steps, strings.Join(names, ", "), judged)
	// The model must be judging: a run where it judged nothing tests only
	// the stores against each other.
	if judged < steps/5 {
		t.Errorf("the model judged %d of %d operations, fewer than one in five", judged, steps)
	}
}
