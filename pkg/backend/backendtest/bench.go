package backendtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// RunBenchmarks runs the shared store benchmarks, each on a fresh store:
// AdmitSingle (one caller, one admission per call), AdmitParallel (8
// callers per GOMAXPROCS through b.RunParallel: the group-commit case),
// AdmitSessions (calls of 1,000 admissions to 100 sessions, as a producer
// host's poll) and ClaimSettle (a drainer's claim and settle with a turn's two messages).
func RunBenchmarks(b *testing.B, newStore func(b *testing.B) backend.Store) {
	ctx := context.Background()
	open := func(b *testing.B, s backend.Store) {
		b.Helper()
		if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "bench", Owner: Owner}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("AdmitSingle", func(b *testing.B) {
		s := newStore(b)
		open(b, s)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "bench", Kind: backend.KindHuman, Principal: Owner, Payload: Payload(fmt.Sprint("m", i))}})
			if err == nil {
				err = res[0].Err
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AdmitParallel", func(b *testing.B) {
		s := newStore(b)
		open(b, s)
		var n atomic.Int64
		b.SetParallelism(8) // 8 callers per GOMAXPROCS: concurrent writers
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := n.Add(1)
				res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "bench", Kind: backend.KindAutomation, Producer: Producer,
					Principal: Owner, Identities: []string{fmt.Sprint("id-", i)}, Payload: Payload(fmt.Sprint("m", i))}})
				if err == nil {
					err = res[0].Err
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("AdmitSessions", func(b *testing.B) {
		// A producer host's poll: calls of 1,000 automation admissions
		// spread over 100 sessions (10 each); b.N counts admissions.
		const sessions, perCall = 100, 1000
		s := newStore(b)
		for k := range sessions {
			if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: fmt.Sprint("bench-", k), Owner: Owner}); err != nil {
				b.Fatal(err)
			}
		}
		reqs := make([]backend.AdmitRequest, 0, perCall)
		b.ResetTimer()
		for i := 0; i < b.N; i += len(reqs) {
			reqs = reqs[:0]
			for j := i; j < b.N && len(reqs) < perCall; j++ {
				reqs = append(reqs, backend.AdmitRequest{Session: fmt.Sprint("bench-", j%sessions), Kind: backend.KindAutomation,
					Producer: Producer, Principal: Owner, Identities: []string{fmt.Sprint("id-", j)}, Payload: Payload(fmt.Sprint("m", j))})
			}
			res, err := s.Admit(ctx, reqs)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		}
	})
	b.Run("ClaimSettle", func(b *testing.B) {
		s := newStore(b)
		open(b, s)
		reqs := make([]backend.AdmitRequest, 0, 256)
		for i := 0; i < b.N; i += len(reqs) {
			reqs = reqs[:0]
			for j := i; j < b.N && len(reqs) < cap(reqs); j++ {
				reqs = append(reqs, backend.AdmitRequest{Session: "bench", Kind: backend.KindHuman, Principal: Owner, Payload: Payload(fmt.Sprint("m", j))})
			}
			if _, err := s.Admit(ctx, reqs); err != nil {
				b.Fatal(err)
			}
		}
		l, err := s.AcquireLease(ctx, backend.LeaseRequest{Principal: Owner, Session: "bench", Holder: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			head, err := s.ListAdmissions(ctx, "bench", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}, Limit: 1})
			if err != nil || len(head) != 1 {
				b.Fatalf("head: %v %d", err, len(head))
			}
			c, err := s.Claim(ctx, backend.ClaimRequest{Session: "bench", AdmissionID: head[0].ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Settle(ctx, backend.SettleRequest{Session: "bench", AdmissionID: c.ID, Epoch: c.Epoch, Generation: c.Generation,
				Outcome: backend.OutcomeCompleted, Messages: turnMessages("bench", c.Text(), "reply")}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
