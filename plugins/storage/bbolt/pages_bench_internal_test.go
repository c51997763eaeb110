package bbolt

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// BenchmarkCommitPages reports the pages one commit writes (pages/op, the
// meta page included) beside its time: an automation admit, and a turn's
// settle of one admission with its two messages together with the claim of
// the next (SettleClaim), each with 1,000 and with 100,000 admissions
// queued in the session. On a disk where each run of adjacent dirty pages
// costs the commit's first fdatasync its own write, the pages a commit
// writes, scattered over the file as bbolt's copy-on-write places them,
// are what depth and a turn pay beyond one small commit
// (docs/performance.md, "A sixth look"). Run with
//
//	go test -run '^$' -bench CommitPages -benchtime 2000x ./plugins/storage/bbolt/
func BenchmarkCommitPages(b *testing.B) {
	for _, depth := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("Admit/queued=%d", depth), func(b *testing.B) {
			ctx := context.Background()
			s := pagesStore(b, depth)
			b.ResetTimer()
			before := pagesWritten(b, s)
			for i := 0; i < b.N; i++ {
				if err := first(s.Admit(ctx, []backend.AdmitRequest{pagesNote(depth + i)})); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(pagesWritten(b, s)-before)/float64(b.N), "pages/op")
		})
		b.Run(fmt.Sprintf("Turn/queued=%d", depth), func(b *testing.B) {
			ctx := context.Background()
			s := pagesStore(b, depth+b.N+1)
			l, err := s.AcquireLease(ctx, backend.LeaseRequest{Principal: "bench", Session: "p", Holder: "bench", TTL: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			heads, err := s.ListAdmissions(ctx, "p", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}, Limit: b.N + 1})
			if err != nil || len(heads) != b.N+1 {
				b.Fatalf("heads: %d, %v", len(heads), err)
			}
			claim := func(id string) backend.ClaimRequest {
				return backend.ClaimRequest{Session: "p", AdmissionID: id, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "p"}
			}
			cur, err := s.Claim(ctx, claim(heads[0].ID))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			before := pagesWritten(b, s)
			for i := 0; i < b.N; i++ {
				r, err := s.SettleClaim(ctx, backend.SettleRequest{
					Session: "p", AdmissionID: cur.ID, Epoch: cur.Epoch, Generation: cur.Generation, Outcome: backend.OutcomeCompleted,
					Messages: []backend.NewMessage{
						{Transcript: "p", Role: backend.RoleUser, Content: cur.Text()},
						{Transcript: "p", Role: backend.RoleAssistant, Content: "reply"},
					},
				}, claim(heads[i+1].ID))
				if err == nil {
					err = r.ClaimErr
				}
				if err != nil {
					b.Fatal(err)
				}
				cur = r.Claimed
			}
			b.ReportMetric(float64(pagesWritten(b, s)-before)/float64(b.N), "pages/op")
		})
	}
}

// pagesStore is a store whose file stays open between operations (nobody
// else waits for it), holding session p with depth notes queued.
func pagesStore(b *testing.B, depth int) *Store {
	b.Helper()
	ctx := context.Background()
	s := openHeld(b, filepath.Join(b.TempDir(), "hermesq.db"))
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "p", Owner: "bench"}); err != nil {
		b.Fatal(err)
	}
	// A store in use has a full change log, which every commit appends
	// to and trims: changeLogSize commits of grants fill it.
	for i := 0; i < changeLogSize; i++ {
		role := []backend.GrantRole{backend.RoleReader, backend.RoleWriter}[i%2]
		if err := s.Grant(ctx, "p", backend.Grant{Principal: "viewer", Role: role}); err != nil {
			b.Fatal(err)
		}
	}
	reqs := make([]backend.AdmitRequest, 0, 1000)
	for i := 0; i < depth; i += len(reqs) {
		reqs = reqs[:0]
		for j := i; j < depth && len(reqs) < cap(reqs); j++ {
			reqs = append(reqs, pagesNote(j))
		}
		if err := first(s.Admit(ctx, reqs)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// pagesNote is automation input number i of session p.
func pagesNote(i int) backend.AdmitRequest {
	payload, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("[finished] make test %d (exit 0)", i)})
	return backend.AdmitRequest{Session: "p", Kind: backend.KindAutomation, Producer: "bench", Principal: "bench",
		Identities: []string{fmt.Sprintf("completion:p:%d", i)}, Payload: payload}
}

// first is the call's error, or else its first refused request's.
func first(res []backend.AdmitResult, err error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// pagesWritten is how many pages the store's open file has had written
// since it was opened; the benchmark fails if the file was closed.
func pagesWritten(b *testing.B, s *Store) int64 {
	b.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		b.Fatal("the store's file is not open")
	}
	st := s.db.Stats()
	return st.TxStats.GetWrite()
}
