package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/producertest"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func openOutbox(t *testing.T, opts producer.OutboxOptions) (*producer.Outbox, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if opts.Now == nil {
		opts.Now = c.now
	}
	ob, err := producer.OpenOutbox(filepath.Join(t.TempDir(), "state", "delegation"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return ob, c
}

func add(t *testing.T, ob *producer.Outbox, session, id, text string) {
	t.Helper()
	added, err := ob.Add(context.Background(), producer.Event{Session: session, Target: session, Identity: id, Text: text})
	if err != nil || !added {
		t.Fatalf("add %s: added %v, %v", id, added, err)
	}
}

func poll(t *testing.T, ob *producer.Outbox, max int) []producer.Offer {
	t.Helper()
	offers, err := ob.Poll(context.Background(), max)
	if err != nil {
		t.Fatal(err)
	}
	return offers
}

func entries(t *testing.T, ob *producer.Outbox) map[string]producer.Entry {
	t.Helper()
	es, err := ob.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]producer.Entry{}
	for _, e := range es {
		m[e.Identity] = e
	}
	return m
}

func TestOutboxFileModes(t *testing.T) {
	ob, _ := openOutbox(t, producer.OutboxOptions{})
	fi, err := os.Stat(ob.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("outbox file mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(ob.Path()))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("state folder mode %v, want 0700", di.Mode().Perm())
	}
}

func TestOutboxAddKeepsTheFirst(t *testing.T) {
	ob, _ := openOutbox(t, producer.OutboxOptions{})
	add(t, ob, "s1", "A", "first")
	added, err := ob.Add(context.Background(), producer.Event{Session: "s1", Identity: "A", Text: "second"})
	if err != nil || added {
		t.Fatalf("second add: added %v, %v; want false, nil", added, err)
	}
	if got := entries(t, ob)["A"].Text; got != "first" {
		t.Fatalf("text %q, want the first", got)
	}
	for _, ev := range []producer.Event{
		{Identity: "X", Text: "t"},
		{Session: "s1", Text: "t"},
		{Session: "s1", Identity: "X"},
		{Session: "s1", Identity: "X", Text: "t", Payload: json.RawMessage(`{"text":"t"}`)},
		{Session: "s1", Identity: "X", Payload: json.RawMessage(`[1]`)},
		{Session: "s1", Identity: "X", Payload: json.RawMessage(`{"text":""}`)},
	} {
		if _, err := ob.Add(context.Background(), ev); !errors.Is(err, producer.ErrInvalidEvent) {
			t.Errorf("add %+v: %v, want ErrInvalidEvent", ev, err)
		}
	}
}

func TestOutboxClaimLeaseAndActions(t *testing.T) {
	ob, c := openOutbox(t, producer.OutboxOptions{Lease: time.Minute, MaxAttempts: 2})
	ctx := context.Background()
	add(t, ob, "s1", "A", "alpha")
	add(t, ob, "s2", "B", "bravo")

	offers := poll(t, ob, 10)
	if len(offers) != 2 || offers[0].Identities[0] != "A" || offers[1].Identities[0] != "B" {
		t.Fatalf("offers %+v, want A then B, one each", offers)
	}
	if again := poll(t, ob, 10); len(again) != 0 {
		t.Fatalf("claimed events offered again within the lease: %+v", again)
	}
	// A's host dies: after the lease A is offered again with a new claim.
	if err := ob.Settle(ctx, offers[1].Claim, producer.Complete, ""); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Minute)
	re := poll(t, ob, 10)
	if len(re) != 1 || re[0].Identities[0] != "A" || re[0].Claim == offers[0].Claim {
		t.Fatalf("after the lease: %+v, want A under a new claim", re)
	}
	if err := ob.Settle(ctx, offers[0].Claim, producer.Complete, ""); !errors.Is(err, producer.ErrUnknownClaim) {
		t.Fatalf("settle of the expired claim: %v, want ErrUnknownClaim", err)
	}
	e := entries(t, ob)
	if e["A"].Attempts != 2 || e["A"].State != producer.StatePending || e["B"].State != producer.StateDelivered {
		t.Fatalf("entries %+v", e)
	}
	// defer refunds the attempt; release counts it and drops at MaxAttempts.
	if err := ob.Settle(ctx, re[0].Claim, producer.Defer, "store down"); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, ob)["A"].Attempts; got != 1 {
		t.Fatalf("attempts after defer %d, want 1", got)
	}
	re = poll(t, ob, 10)
	if err := ob.Settle(ctx, re[0].Claim, producer.Release, "conflict"); err != nil {
		t.Fatal(err)
	}
	a := entries(t, ob)["A"]
	if a.State != producer.StateDropped || a.Reason == "" {
		t.Fatalf("A after release at max attempts: %+v, want dropped with a reason", a)
	}
	if len(poll(t, ob, 10)) != 0 {
		t.Fatal("a dropped event was offered")
	}
	counts, err := ob.Count(ctx)
	if err != nil || counts != (producer.Counts{Delivered: 1, Dropped: 1}) {
		t.Fatalf("counts %+v, %v", counts, err)
	}
	add(t, ob, "s1", "C", "charlie")
	re = poll(t, ob, 10)
	if err := ob.Settle(ctx, re[0].Claim, producer.Drop, "invalid: bad session"); err != nil {
		t.Fatal(err)
	}
	if c := entries(t, ob)["C"]; c.State != producer.StateDropped || c.Reason != "invalid: bad session" {
		t.Fatalf("C %+v", c)
	}
}

func TestOutboxCoalescesASessionsEvents(t *testing.T) {
	ob, c := openOutbox(t, producer.OutboxOptions{Coalesce: true, Lease: time.Minute})
	ctx := context.Background()
	add(t, ob, "s1", "A", "alpha")
	first := poll(t, ob, 10)
	if len(first) != 1 || len(first[0].Parts) != 1 {
		t.Fatalf("first %+v", first)
	}
	// A's acknowledgement is lost; B arrives; after the lease A and B are
	// one offer with a part each, in order.
	add(t, ob, "s1", "B", "bravo")
	add(t, ob, "s2", "X", "xray")
	c.t = c.t.Add(2 * time.Minute)
	offers := poll(t, ob, 10)
	if len(offers) != 2 {
		t.Fatalf("offers %+v, want two groups", offers)
	}
	got := offers[0]
	if got.Session != "s1" || len(got.Parts) != 2 || got.Parts[0].Identity != "A" || got.Parts[0].Text != "alpha" ||
		got.Parts[1].Identity != "B" || got.Parts[1].Text != "bravo" || len(got.Identities) != 0 {
		t.Fatalf("group %+v", got)
	}
	if err := ob.Settle(ctx, got.Claim, producer.Complete, ""); err != nil {
		t.Fatal(err)
	}
	e := entries(t, ob)
	if e["A"].State != producer.StateDelivered || e["B"].State != producer.StateDelivered || e["X"].State != producer.StatePending {
		t.Fatalf("entries %+v", e)
	}
	// max bounds the events, not the offers.
	add(t, ob, "s1", "C", "c")
	add(t, ob, "s1", "D", "d")
	c.t = c.t.Add(2 * time.Minute)
	if offers := poll(t, ob, 2); len(offers) != 2 || len(offers[0].Parts)+len(offers[1].Parts) != 2 {
		t.Fatalf("poll(max 2): %+v", offers)
	}
}

func TestOutboxRetention(t *testing.T) {
	ob, c := openOutbox(t, producer.OutboxOptions{Retention: time.Hour})
	add(t, ob, "s1", "A", "alpha")
	offers := poll(t, ob, 1)
	if err := ob.Settle(context.Background(), offers[0].Claim, producer.Complete, ""); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour)
	poll(t, ob, 1)
	if e := entries(t, ob); len(e) != 0 {
		t.Fatalf("delivered entry kept past the retention: %+v", e)
	}
}

// Another process holding the file (bbolt allows one opener) makes an
// operation wait at most LockWait, then fail with ErrLocked; once it lets
// go, operations work.
func TestOutboxLockedByAnotherOpener(t *testing.T) {
	ob, _ := openOutbox(t, producer.OutboxOptions{LockWait: 50 * time.Millisecond})
	db, err := bolt.Open(ob.Path(), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ob.Add(context.Background(), producer.Event{Session: "s1", Identity: "A", Text: "alpha"})
	if !errors.Is(err, producer.ErrLocked) {
		t.Fatalf("add while locked: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	add(t, ob, "s1", "A", "alpha")
}

func TestOutboxThroughProducertest(t *testing.T) {
	for _, co := range []bool{false, true} {
		ob, _ := openOutbox(t, producer.OutboxOptions{Coalesce: co})
		add(t, ob, "s1", "A", "alpha")
		add(t, ob, "s1", "B", "bravo")
		add(t, ob, "s2", "C", "charlie")
		producertest.Run(t, ob)
		counts, err := ob.Count(context.Background())
		if err != nil || counts != (producer.Counts{Delivered: 3}) {
			t.Fatalf("coalesce %v: counts %+v, %v", co, counts, err)
		}
	}
}
