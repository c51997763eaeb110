package bbolt

import (
	"context"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestAppendedIndexesFull: the buckets whose keys grow at one end keep
// their leaves full (appendFill) whether they are appended to one key a
// transaction (single admits, the change log, the turns' messages) or
// many (a batch); bbolt's default fill would leave them about half empty.
// An index of keys that land anywhere (ident/) keeps the default.
func TestAppendedIndexesFull(t *testing.T) {
	ctx := context.Background()
	s := openWithSession(t)
	sess, err := s.GetSession(ctx, "s1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	admit := func(reqs []backend.AdmitRequest) []backend.Admission {
		t.Helper()
		res, err := s.Admit(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]backend.Admission, len(res))
		for i, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			out[i] = r.Admission
		}
		return out
	}
	human := func(i int) backend.AdmitRequest {
		return backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: "alice",
			Payload: []byte(fmt.Sprintf(`{"text":"question %d"}`, i))}
	}
	// Turns: a claim and a settle with two messages each, one transaction
	// each, as a drain of turns writes them.
	const turns = 120
	l, err := s.AcquireLease(ctx, backend.LeaseRequest{Principal: "alice", Session: "s1", Holder: "A"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < turns; i++ {
		a := admit([]backend.AdmitRequest{human(i)})[0]
		c, err := s.Claim(ctx, backend.ClaimRequest{Session: "s1", AdmissionID: a.ID, Epoch: l.Epoch, Mode: backend.ModeTurn,
			DeliveredTo: sess.CurrentTranscript})
		if err != nil {
			t.Fatal(err)
		}
		msg := func(role backend.Role, text string) backend.NewMessage {
			return backend.NewMessage{Transcript: sess.CurrentTranscript, Role: role, Content: text,
				Metadata: map[string]any{"admission_id": a.ID}}
		}
		if _, err := s.Settle(ctx, backend.SettleRequest{Session: "s1", AdmissionID: c.ID, Epoch: c.Epoch, Generation: c.Generation,
			Outcome: backend.OutcomeCompleted, ExpectCurrent: sess.CurrentTranscript,
			Messages: []backend.NewMessage{msg(backend.RoleUser, fmt.Sprintf("question %d", i)), msg(backend.RoleAssistant, "an answer")}}); err != nil {
			t.Fatal(err)
		}
	}
	// Single admits, one transaction each, then a batch in one call.
	for i := 0; i < 300; i++ {
		admit([]backend.AdmitRequest{human(i)})
	}
	var batch []backend.AdmitRequest
	for i := 0; i < 1500; i++ {
		batch = append(batch, backend.AdmitRequest{Session: "s1", Kind: backend.KindAutomation, Producer: "bench", Principal: "alice",
			Identities: []string{fmt.Sprintf("ident-%d", (i*7919)%1500)}, Payload: []byte(fmt.Sprintf(`{"text":"note %d"}`, i))})
	}
	admit(batch)

	err = s.view(ctx, func(tx *txn) error {
		fill := func(b *bolt.Bucket) (float64, int) {
			st := b.Stats()
			return float64(st.LeafInuse) / float64(st.LeafPageN*tx.tx.DB().Info().PageSize), st.LeafPageN
		}
		sb := tx.sessionBucket("s1")
		for _, c := range []struct {
			name string
			b    *bolt.Bucket
			min  float64
			max  float64
		}{
			{"sessions/s1/adm", sb.Bucket(subAdmissions), 0.8, 1},
			{"sessions/s1/queued", sb.Bucket(subQueued), 0.8, 1},
			{"admissions", tx.tx.Bucket(bucketAdmissions), 0.8, 1},
			{"changes", tx.tx.Bucket(bucketChanges), 0.8, 1},
			{"messages/" + sess.CurrentTranscript, tx.tx.Bucket(bucketMessages).Bucket([]byte(sess.CurrentTranscript)), 0.8, 1},
			{"sessions/s1/ident (keys anywhere: the default fill)", sb.Bucket(subIdentities), 0, 0.8},
		} {
			f, pages := fill(c.b)
			t.Logf("%s: %d leaf pages, %.0f%% full", c.name, pages, 100*f)
			if pages < 4 {
				t.Errorf("%s: %d leaf pages: too few to tell a fill", c.name, pages)
			}
			if f < c.min || f > c.max {
				t.Errorf("%s: leaves %.0f%% full, want %.0f%% to %.0f%%", c.name, 100*f, 100*c.min, 100*c.max)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
