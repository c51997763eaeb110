package producer_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/producer"
)

// rawOutbox runs fn on the outbox's file, opened directly.
func rawOutbox(t *testing.T, ob *producer.Outbox, write bool, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(ob.Path(), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if write {
		err = db.Update(fn)
	} else {
		err = db.View(fn)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// rawState returns the stored entry of s1/identity and how many leases
// the outbox holds.
func rawState(t *testing.T, ob *producer.Outbox, identity string) (entry []byte, leases int) {
	t.Helper()
	rawOutbox(t, ob, false, func(tx *bolt.Tx) error {
		entry = bytes.Clone(tx.Bucket([]byte("events")).Get([]byte("s1\x00" + identity)))
		leases = tx.Bucket([]byte("leases")).Stats().KeyN
		return nil
	})
	return entry, leases
}

// A poll records its claims in leases and leaves the entries as they are;
// the claim is read back with the entry while it lasts, and ending it
// (complete, retry, reject, drop, the age limit) writes the attempts into
// the entry and deletes the lease.
func TestOutboxClaimsLiveInLeases(t *testing.T) {
	ob, c := openOutbox(t, producer.OutboxOptions{Lease: time.Minute, Retention: time.Hour, MaxAge: 90 * time.Minute})
	ctx := context.Background()
	for _, id := range []string{"A", "B", "C", "D", "E"} {
		add(t, ob, "s1", id, "text "+id)
	}
	before, _ := rawState(t, ob, "A")
	offers := poll(t, ob, 10)
	if len(offers) != 5 {
		t.Fatalf("offers %+v, want five", offers)
	}
	after, leases := rawState(t, ob, "A")
	if !bytes.Equal(before, after) || leases != 5 {
		t.Fatalf("after the poll: entry rewritten %v, %d leases; want the entry as it was and five leases", !bytes.Equal(before, after), leases)
	}
	claimed := c.t
	e := entries(t, ob)
	for i, id := range []string{"A", "B", "C", "D", "E"} {
		if got := e[id]; got.Claim != offers[i].Claim || !got.ClaimedAt.Equal(claimed) || got.Attempts != 1 || got.State != producer.StatePending {
			t.Fatalf("%s while claimed: %+v, want claim %s at %s, attempt 1", id, got, offers[i].Claim, claimed)
		}
	}
	if counts, err := ob.CountPending(ctx); err != nil || counts.Pending != 5 || counts.Claimed != 5 {
		t.Fatalf("pending counts %+v, %v", counts, err)
	}

	c.t = c.t.Add(time.Second)
	settle(t, ob, offers[0].Claim, producer.Settlement{Action: producer.Complete})
	settle(t, ob, offers[1].Claim, producer.Settlement{Action: producer.Retry, Reason: "busy", NotBefore: c.t.Add(time.Second)})
	settle(t, ob, offers[2].Claim, producer.Settlement{Action: producer.Reject, Reason: "invalid"})
	if err := ob.Drop(ctx, []uint64{e["D"].Seq}, "by hand"); err != nil {
		t.Fatal(err)
	}
	e = entries(t, ob)
	want := map[string]string{"A": producer.StateDelivered, "B": producer.StatePending, "C": producer.StateRejected, "D": producer.StateDropped, "E": producer.StatePending}
	for id, state := range want {
		got := e[id]
		if got.State != state || got.Attempts != 1 || (id != "E" && (got.Claim != "" || !got.ClaimedAt.IsZero())) {
			t.Fatalf("%s after its claim ended: %+v, want %s, attempt 1, no claim", id, got, state)
		}
	}
	if _, leases := rawState(t, ob, "A"); leases != 1 {
		t.Fatalf("%d leases, want E's alone", leases)
	}
	// After an hour B is offered again, attempt 2, and so is E, its claim
	// run out.
	c.t = c.t.Add(time.Hour)
	again := poll(t, ob, 10)
	if len(again) != 2 || again[0].Identities[0] != "B" || again[0].Attempts != 2 || again[1].Identities[0] != "E" || again[1].Attempts != 2 {
		t.Fatalf("offers %+v, want B then E, attempt 2", again)
	}
	if err := ob.Settle(ctx, offers[4].Claim, producer.Settlement{Action: producer.Complete}); !errors.Is(err, producer.ErrUnknownClaim) {
		t.Fatalf("settle of E's run-out claim: %v, want ErrUnknownClaim", err)
	}
	// Both claims run out and both pass the age limit: dropped, their
	// leases gone.
	c.t = c.t.Add(time.Hour)
	if got := poll(t, ob, 10); len(got) != 0 {
		t.Fatalf("offers past the age limit: %+v", got)
	}
	e = entries(t, ob)
	for _, id := range []string{"B", "E"} {
		if got := e[id]; got.State != producer.StateDropped || got.Attempts != 2 || got.Claim != "" {
			t.Fatalf("%s past the age limit: %+v, want dropped, attempt 2", id, got)
		}
	}
	if _, leases := rawState(t, ob, "A"); leases != 0 {
		t.Fatalf("%d leases, want none", leases)
	}
}

// An outbox written before leases keeps a claim in the entry: its claimed
// events are read with that claim, settled under it, and offered again
// when its lease has run out.
func TestOutboxReadsClaimsInOldEntries(t *testing.T) {
	ob, c := openOutbox(t, producer.OutboxOptions{Lease: time.Minute})
	ctx := context.Background()
	const live, expired = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	at := c.t.Format(time.RFC3339Nano)
	old := map[string]string{
		"s1\x00LIVE":    `{"session":"s1","target":"s1","identity":"LIVE","text":"live","seq":1,"state":"pending","claim":"` + live + `","claimed_at":"` + at + `","attempts":2,"added_at":"` + at + `"}`,
		"s1\x00EXPIRED": `{"session":"s1","target":"s1","identity":"EXPIRED","text":"expired","seq":2,"state":"pending","claim":"` + expired + `","claimed_at":"2025-01-02T03:04:05Z","attempts":3,"added_at":"2025-01-02T03:04:05Z"}`,
	}
	rawOutbox(t, ob, true, func(tx *bolt.Tx) error {
		ev, pending, claims := tx.Bucket([]byte("events")), tx.Bucket([]byte("pending")), tx.Bucket([]byte("claims"))
		for k, v := range old {
			if err := ev.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		if err := ev.SetSequence(2); err != nil {
			return err
		}
		for seq, id := range []string{"LIVE", "EXPIRED"} {
			if err := pending.Put([]byte{0, 0, 0, 0, 0, 0, 0, byte(seq + 1)}, []byte("s1\x00"+id)); err != nil {
				return err
			}
		}
		if err := claims.Put([]byte(live), []byte(`["czEATElWRQ=="]`)); err != nil {
			return err
		}
		return claims.Put([]byte(expired), []byte(`["czEARVhQSVJFRA=="]`))
	})
	if counts, err := ob.CountPending(ctx); err != nil || counts.Pending != 2 || counts.Claimed != 2 {
		t.Fatalf("pending counts %+v, %v", counts, err)
	}
	offers := poll(t, ob, 10)
	if len(offers) != 1 || offers[0].Identities[0] != "EXPIRED" || offers[0].Attempts != 4 || offers[0].Claim == expired {
		t.Fatalf("offers %+v, want EXPIRED alone under a new claim, attempt 4", offers)
	}
	if err := ob.Settle(ctx, expired, producer.Settlement{Action: producer.Complete}); !errors.Is(err, producer.ErrUnknownClaim) {
		t.Fatalf("settle of the expired old claim: %v, want ErrUnknownClaim", err)
	}
	if err := ob.Settle(ctx, live, producer.Settlement{Action: producer.Complete}); err != nil {
		t.Fatalf("settle of the live old claim: %v", err)
	}
	if err := ob.Settle(ctx, offers[0].Claim, producer.Settlement{Action: producer.Complete}); err != nil {
		t.Fatal(err)
	}
	e := entries(t, ob)
	if e["LIVE"].State != producer.StateDelivered || e["LIVE"].Attempts != 2 || e["EXPIRED"].State != producer.StateDelivered || e["EXPIRED"].Attempts != 4 {
		t.Fatalf("entries %+v", e)
	}
}

// A lease the outbox cannot read fails the poll, naming the event; the
// event stays as it is.
func TestOutboxRefusesAMalformedLease(t *testing.T) {
	ob, _ := openOutbox(t, producer.OutboxOptions{})
	add(t, ob, "s1", "A", "alpha")
	rawOutbox(t, ob, true, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("leases")).Put([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte("short"))
	})
	_, err := ob.Poll(context.Background(), producer.PollRequest{Max: 10})
	if err == nil || !strings.Contains(err.Error(), "lease of event 1: malformed lease") {
		t.Fatalf("poll: %v, want the malformed lease of event 1", err)
	}
	if _, err := ob.Entries(context.Background()); err == nil || !strings.Contains(err.Error(), "lease of event 1: malformed lease") {
		t.Fatalf("list: %v, want the malformed lease of event 1", err)
	}
	if entry, _ := rawState(t, ob, "A"); !bytes.Contains(entry, []byte(`"state":"pending"`)) {
		t.Fatalf("A %s, want pending as it was", entry)
	}
}
