package producer_test

import (
	"context"
	"testing"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/producertest"
)

// BenchmarkOutboxRounds adds 10,000 delegation-like events over 100
// sessions to a fresh outbox and delivers them as a producer host does:
// polls of up to 1,024 events (coalesced per session), each poll's
// offers settled Complete in one SettleAll, until nothing is left. It
// reports the outbox's time per event, the part of figure 10 of the bench
// that the plugin's outbox takes. Run with
//
//	go test -run '^$' -bench OutboxRounds -benchtime 5x ./pkg/producer/
func BenchmarkOutboxRounds(b *testing.B) {
	const events, sessions = 10000, 100
	ctx := context.Background()
	evs := producertest.DelegationResults(events, sessions)
	for b.Loop() {
		b.StopTimer()
		ob, err := producer.OpenOutbox(b.TempDir(), producer.OutboxOptions{Coalesce: true})
		if err != nil {
			b.Fatal(err)
		}
		if added, err := ob.AddAll(ctx, evs); err != nil || added != events {
			b.Fatalf("added %d of %d: %v", added, events, err)
		}
		b.StartTimer()
		delivered := 0
		for {
			offers, err := ob.Poll(ctx, producer.PollRequest{Max: 1024, PayloadLimit: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			if len(offers) == 0 {
				break
			}
			settles := make([]producer.ClaimSettlement, len(offers))
			for i, o := range offers {
				settles[i] = producer.ClaimSettlement{Claim: o.Claim, Settlement: producer.Settlement{Action: producer.Complete}}
				delivered += len(o.IdentityList())
			}
			for _, err := range ob.SettleAll(ctx, settles) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		if delivered != events {
			b.Fatalf("delivered %d of %d", delivered, events)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events)/1000, "µs/event")
}
