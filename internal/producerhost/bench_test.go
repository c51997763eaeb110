package producerhost

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/producertest"
)

// Bench sizes: 10,000 delegation results over 100 sessions, arriving
// interleaved (so each poll coalesces a few results per session).
const (
	benchResults  = 10000
	benchSessions = 100
)

// BenchmarkProducerDelegation offers 10,000 delegation results through the
// real delegation plugin (go-plugin over gRPC with mTLS) into bbolt and into
// Redis with producers run --once's loop, and reports admissions per second
// and the share of the loop's time spent in plugin calls (Poll, Settle:
// gRPC), in the plugin's outbox (as the plugin reports it) and in the
// store (AdmitBatch). Run with
//
//	go test -run '^$' -bench ProducerDelegation -benchtime 1x ./internal/producerhost/
func BenchmarkProducerDelegation(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "hermesq-producer-delegation")
	build := exec.Command("go", "build", "-o", bin, "../../plugins/producers/delegation")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build delegation plugin: %v\n%s", err, out)
	}
	var srv *redistest.Server
	for _, name := range []string{"bbolt", "redis"} {
		b.Run(name, func(b *testing.B) {
			var rpc, outbox, inStore, total time.Duration
			admitted := 0
			for range b.N {
				b.StopTimer()
				url := "bbolt://" + filepath.Join(b.TempDir(), "hermesq.db")
				if name == "redis" {
					if srv == nil {
						redistest.Require(b)
						srv = redistest.Start(b)
					}
					url = srv.FreshURL()
				}
				h, spec := benchHost(b, url, bin)
				b.StartTimer()
				start := time.Now()
				if rep := h.Run(context.Background(), []Spec{spec}); len(rep.Failures) > 0 {
					b.Fatalf("producers run: %v", rep.Failures[0].Err)
				}
				total += time.Since(start)
				b.StopTimer()
				rpc += h.Timing.RPC
				outbox += h.Timing.Outbox
				inStore += h.Timing.Store
				admitted += h.Timing.Admitted
				if h.Timing.Admitted != benchResults {
					b.Fatalf("admitted %d results, want %d", h.Timing.Admitted, benchResults)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(admitted)/total.Seconds(), "admissions/s")
			b.ReportMetric(100*rpc.Seconds()/total.Seconds(), "%rpc")
			b.ReportMetric(100*outbox.Seconds()/total.Seconds(), "%outbox")
			b.ReportMetric(100*inStore.Seconds()/total.Seconds(), "%store")
			b.ReportMetric(0, "ns/op") // one op is the whole 10,000: see admissions/s
		})
	}
}

// benchHost returns a host over a fresh store at url whose delegation
// plugin's outbox holds benchResults ready results.
func benchHost(b *testing.B, url, bin string) (*Host, Spec) {
	b.Helper()
	ctx := context.Background()
	st, err := openStore(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	for i := range benchSessions {
		if _, _, err := st.OpenSession(ctx, backend.OpenSessionRequest{ID: fmt.Sprintf("s%03d", i), Owner: "bench", Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	cfg := Config{StateDir: dir, StartTimeout: 30 * time.Second, Poll: 50 * time.Millisecond}
	ob, err := producer.OpenOutbox(cfg.PluginStateDir("delegation"), producer.OutboxOptions{})
	if err != nil {
		b.Fatal(err)
	}
	evs := producertest.DelegationResults(benchResults, benchSessions)
	if n, err := ob.AddAll(ctx, evs); err != nil || n != benchResults {
		b.Fatalf("outbox: added %d, %v", n, err)
	}
	h := &Host{
		Admission: &admission.Service{Store: st},
		Principal: "bench",
		Config:    cfg,
		Once:      true,
		Stderr:    benchLog{b},
		Timing:    &Timing{},
		Launch:    testLaunch,
	}
	return h, Spec{Name: "delegation", Path: bin, Enabled: true}
}

type benchLog struct{ b *testing.B }

func (l benchLog) Write(p []byte) (int, error) { l.b.Logf("%s", p); return len(p), nil }
