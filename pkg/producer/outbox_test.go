package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	offers, err := ob.Poll(context.Background(), producer.PollRequest{Max: max})
	if err != nil {
		t.Fatal(err)
	}
	return offers
}

// settle ends claim with s.
func settle(t *testing.T, ob *producer.Outbox, claim string, s producer.Settlement) {
	t.Helper()
	if err := ob.Settle(context.Background(), claim, s); err != nil {
		t.Fatal(err)
	}
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
	ob, c := openOutbox(t, producer.OutboxOptions{Lease: time.Minute, Retention: time.Hour})
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
	if err := ob.Settle(ctx, offers[1].Claim, producer.Settlement{Action: producer.Complete}); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(time.Minute)
	re := poll(t, ob, 10)
	if len(re) != 1 || re[0].Identities[0] != "A" || re[0].Claim == offers[0].Claim {
		t.Fatalf("after the lease: %+v, want A under a new claim", re)
	}
	if err := ob.Settle(ctx, offers[0].Claim, producer.Settlement{Action: producer.Complete}); !errors.Is(err, producer.ErrUnknownClaim) {
		t.Fatalf("settle of the expired claim: %v, want ErrUnknownClaim", err)
	}
	e := entries(t, ob)
	if e["A"].Attempts != 2 || e["A"].State != producer.StatePending || e["B"].State != producer.StateDelivered {
		t.Fatalf("entries %+v", e)
	}
	// Retry, however often, keeps A pending with the reason, not offered
	// before its not-before time.
	for n := range 20 {
		nb := c.t.Add(time.Duration(n+1) * time.Second)
		if err := ob.Settle(ctx, re[0].Claim, producer.Settlement{Action: producer.Retry, Reason: "session not found", NotBefore: nb}); err != nil {
			t.Fatal(err)
		}
		a := entries(t, ob)["A"]
		if a.State != producer.StatePending || a.Reason != "session not found" || !a.NotBefore.Equal(nb) || !a.Waiting() {
			t.Fatalf("A after retry %d: %+v, want pending, waiting until %s with the reason", n, a, nb)
		}
		if got := poll(t, ob, 10); len(got) != 0 {
			t.Fatalf("A offered before its not-before time: %+v", got)
		}
		c.t = nb
		re = poll(t, ob, 10)
		if len(re) != 1 || re[0].Attempts != n+3 {
			t.Fatalf("at its not-before time: %+v, want A offered, attempt %d", re, n+3)
		}
	}
	counts, err := ob.Count(ctx)
	if err != nil || counts.Pending != 1 || counts.Waiting != 1 || counts.Claimed != 1 || counts.LastReason != "session not found" || counts.Dropped != 0 {
		t.Fatalf("counts %+v, %v", counts, err)
	}
	if err := ob.Settle(ctx, re[0].Claim, producer.Settlement{Action: producer.Complete}); err != nil {
		t.Fatal(err)
	}
	add(t, ob, "s1", "C", "charlie")
	re = poll(t, ob, 10)
	if err := ob.Settle(ctx, re[0].Claim, producer.Settlement{Action: producer.Reject, Reason: "invalid: bad session"}); err != nil {
		t.Fatal(err)
	}
	if c := entries(t, ob)["C"]; c.State != producer.StateRejected || c.Reason != "invalid: bad session" {
		t.Fatalf("C %+v", c)
	}
	if got := poll(t, ob, 10); len(got) != 0 {
		t.Fatalf("a rejected event was offered: %+v", got)
	}
	// Rejected events outlive the retention; the operator drops them.
	c.t = c.t.Add(30 * 24 * time.Hour)
	poll(t, ob, 10)
	cc := entries(t, ob)["C"]
	if cc.State != producer.StateRejected {
		t.Fatalf("C after a month: %+v, want kept as rejected", cc)
	}
	if err := ob.Drop(ctx, []uint64{cc.Seq, 99}, "dropped by the operator"); !errors.Is(err, producer.ErrNoEvent) {
		t.Fatalf("drop of an unknown seq: %v, want ErrNoEvent", err)
	}
	if err := ob.Drop(ctx, []uint64{cc.Seq}, "dropped by the operator"); err != nil {
		t.Fatal(err)
	}
	if c := entries(t, ob)["C"]; c.State != producer.StateDropped || c.Reason != "dropped by the operator; last refused: invalid: bad session" {
		t.Fatalf("C after drop: %+v", c)
	}
	counts, err = ob.Count(ctx)
	if err != nil || counts != (producer.Counts{Dropped: 1}) {
		t.Fatalf("counts %+v, %v (A and B forgotten after the retention)", counts, err)
	}
}

// A split group: the identities admitted are delivered, the rest retried.
func TestOutboxSettleDelivered(t *testing.T) {
	ob, _ := openOutbox(t, producer.OutboxOptions{Coalesce: true})
	ctx := context.Background()
	add(t, ob, "s1", "A", "alpha")
	add(t, ob, "s1", "B", "bravo")
	offers := poll(t, ob, 10)
	if len(offers) != 1 || len(offers[0].Parts) != 2 {
		t.Fatalf("offers %+v", offers)
	}
	if err := ob.Settle(ctx, offers[0].Claim, producer.Settlement{Action: producer.Retry, Reason: "forbidden", Delivered: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	e := entries(t, ob)
	if e["A"].State != producer.StateDelivered || e["B"].State != producer.StatePending || e["B"].Reason != "forbidden" {
		t.Fatalf("entries %+v", e)
	}
}

// The operator's age limit drops pending events older than it, with the
// reason; without one, events wait however long.
func TestOutboxMaxAge(t *testing.T) {
	for _, maxAge := range []time.Duration{0, 48 * time.Hour} {
		ob, c := openOutbox(t, producer.OutboxOptions{MaxAge: maxAge})
		ctx := context.Background()
		add(t, ob, "s1", "A", "alpha")
		re := poll(t, ob, 10)
		if err := ob.Settle(ctx, re[0].Claim, producer.Settlement{Action: producer.Retry, Reason: "forbidden", NotBefore: c.t.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		c.t = c.t.Add(72 * time.Hour)
		got := poll(t, ob, 10)
		a := entries(t, ob)["A"]
		if maxAge == 0 {
			if len(got) != 1 || a.State != producer.StatePending {
				t.Fatalf("no age limit: %+v, %+v, want A offered", got, a)
			}
			continue
		}
		if len(got) != 0 || a.State != producer.StateDropped || !strings.Contains(a.Reason, "producer_max_age") || !strings.Contains(a.Reason, "forbidden") {
			t.Fatalf("past the age limit: %+v, %+v, want A dropped with the reason", got, a)
		}
	}
}

// Coalesce cuts a session's group so its composed payload fits the limit,
// and ComposedSize is the size the store composes (held to
// backend.ComposeParts by the host's tests).
func TestCoalesceFitsTheLimit(t *testing.T) {
	var evs []producer.Event
	for i := range 256 {
		evs = append(evs, producer.Event{Session: "s1", Identity: fmt.Sprintf("id-%03d", i), Text: strings.Repeat("x\"", 700)})
	}
	const limit = 1 << 20
	offers := producer.Coalesce(evs, limit, func(i int) string { return fmt.Sprint(i) })
	if len(offers) < 2 {
		t.Fatalf("%d offers, want the group cut", len(offers))
	}
	n := 0
	for _, o := range offers {
		var g []producer.Event
		for _, p := range o.Parts {
			g = append(g, producer.Event{Session: "s1", Identity: p.Identity, Text: p.Text})
		}
		if sz := producer.ComposedSize(g); sz > limit {
			t.Errorf("offer of %d parts composes %d bytes, more than %d", len(g), sz, limit)
		}
		n += len(o.Parts)
	}
	if n != 256 {
		t.Fatalf("%d parts offered, want 256", n)
	}
	if got := producer.Coalesce(evs, 0, func(i int) string { return "" }); len(got) != 1 {
		t.Fatalf("no limit: %d offers, want 1", len(got))
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
	if err := ob.Settle(ctx, got.Claim, producer.Settlement{Action: producer.Complete}); err != nil {
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
	if err := ob.Settle(context.Background(), offers[0].Claim, producer.Settlement{Action: producer.Complete}); err != nil {
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

// An outbox written before the rejected state holds events dropped by the
// old retry policy (state dropped, no refusal time) and pending events
// released by it (a reason, no not-before time): they are read as they
// are: the dropped ones listed and counted, never offered; the pending
// ones offered at once.
func TestOutboxReadsOldDroppedEvents(t *testing.T) {
	ob, _ := openOutbox(t, producer.OutboxOptions{})
	db, err := bolt.Open(ob.Path(), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{
		"s1\x00OLD":  `{"session":"s1","target":"s1","identity":"OLD","text":"old","seq":1,"state":"dropped","attempts":8,"added_at":"2025-01-02T03:04:05Z","settled_at":"2025-01-02T03:04:06Z","reason":"released after 8 attempts: forbidden"}`,
		"s1\x00KEPT": `{"session":"s1","target":"s1","identity":"KEPT","text":"kept","seq":2,"state":"pending","attempts":3,"added_at":"2025-01-02T03:04:05Z","reason":"conflict"}`,
	}
	err = db.Update(func(tx *bolt.Tx) error {
		ev, _ := tx.CreateBucketIfNotExists([]byte("events"))
		pending, _ := tx.CreateBucketIfNotExists([]byte("pending"))
		for k, v := range old {
			if err := ev.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		_ = ev.SetSequence(2)
		return pending.Put([]byte{0, 0, 0, 0, 0, 0, 0, 2}, []byte("s1\x00KEPT"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	counts, err := ob.Count(context.Background())
	if err != nil || counts.Dropped != 1 || counts.Pending != 1 || counts.Waiting != 0 {
		t.Fatalf("counts %+v, %v", counts, err)
	}
	offers := poll(t, ob, 10)
	if len(offers) != 1 || offers[0].Identities[0] != "KEPT" || offers[0].Attempts != 4 {
		t.Fatalf("offers %+v, want KEPT alone, attempt 4", offers)
	}
	if e := entries(t, ob)["OLD"]; e.State != producer.StateDropped || e.Reason == "" {
		t.Fatalf("OLD %+v", e)
	}
	if err := ob.Drop(context.Background(), []uint64{1}, "again"); !errors.Is(err, producer.ErrNoEvent) {
		t.Fatalf("drop of an event already dropped: %v, want ErrNoEvent", err)
	}
}

// CountPending gives what Count gives of the pending events (the settled
// states 0) at every step of their lives: added, claimed, retried
// (waiting), delivered, rejected, expired past the lease, dropped.
func TestOutboxCountPendingAgreesWithCount(t *testing.T) {
	ob, c := openOutbox(t, producer.OutboxOptions{Lease: time.Minute, Retention: time.Hour})
	ctx := context.Background()
	check := func(step string) {
		t.Helper()
		all, err := ob.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ob.CountPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := all
		want.Rejected, want.Delivered, want.Dropped = 0, 0, 0
		if got != want {
			t.Fatalf("%s: CountPending %+v, Count %+v", step, got, all)
		}
	}
	check("empty")
	for _, id := range []string{"A", "B", "C", "D"} {
		add(t, ob, "s1", id, "text "+id)
	}
	check("added")
	offers := poll(t, ob, 10)
	if len(offers) != 4 {
		t.Fatalf("offers %+v", offers)
	}
	check("claimed")
	settle(t, ob, offers[0].Claim, producer.Settlement{Action: producer.Complete})
	settle(t, ob, offers[1].Claim, producer.Settlement{Action: producer.Retry, Reason: "session not found", NotBefore: c.t.Add(time.Second)})
	settle(t, ob, offers[2].Claim, producer.Settlement{Action: producer.Reject, Reason: "invalid"})
	check("delivered, waiting, rejected, claimed")
	if n := entries(t, ob); n["B"].State != producer.StatePending || !n["B"].Waiting() || n["D"].Claim == "" {
		t.Fatalf("entries %+v", n)
	}
	c.t = c.t.Add(2 * time.Minute)
	check("past the lease")
	if err := ob.Drop(ctx, []uint64{entries(t, ob)["C"].Seq}, "dropped"); err != nil {
		t.Fatal(err)
	}
	check("dropped")
	re := poll(t, ob, 10)
	for _, o := range re {
		if err := ob.Settle(ctx, o.Claim, producer.Settlement{Action: producer.Complete}); err != nil {
			t.Fatal(err)
		}
	}
	check("all settled")
	if got, _ := ob.CountPending(ctx); got != (producer.Counts{}) {
		t.Fatalf("CountPending after every event settled: %+v", got)
	}
}
