package producer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
)

// Many goroutines settle at once, so their settles share transactions:
// every settle lands exactly once, with its own action, and each caller
// gets its own error: a second settle of a claim, and a settle of a claim
// the outbox never gave, fail with ErrUnknownClaim without failing the
// settles committed with them.
func TestOutboxConcurrentSettles(t *testing.T) {
	ob, c := openOutbox(t, producer.OutboxOptions{})
	const n = 120
	evs := make([]producer.Event, n)
	for i := range evs {
		evs[i] = producer.Event{Session: "s1", Target: "s1", Identity: fmt.Sprintf("e%03d", i), Text: "t"}
	}
	if _, err := ob.AddAll(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	offers := poll(t, ob, n)
	if len(offers) != n {
		t.Fatalf("%d offers, want %d", len(offers), n)
	}
	actions := []producer.Action{producer.Complete, producer.Retry, producer.Reject}
	notBefore := c.t.Add(time.Hour)
	settlement := func(i int) producer.Settlement {
		a := actions[i%len(actions)]
		s := producer.Settlement{Action: a}
		if a != producer.Complete {
			s.Reason, s.NotBefore = fmt.Sprintf("reason %d", i), notBefore
		}
		return s
	}

	// Each claim settled twice at once, and as many unknown claims.
	type call struct {
		claim string
		i     int // offer, or -1: an unknown claim
	}
	var calls []call
	for i, o := range offers {
		calls = append(calls, call{o.Claim, i}, call{o.Claim, i}, call{fmt.Sprintf("nosuch%03d", i), -1})
	}
	errs := make([]error, len(calls))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k, cl := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s := producer.Settlement{Action: producer.Complete}
			if cl.i >= 0 {
				s = settlement(cl.i)
			}
			errs[k] = ob.Settle(context.Background(), cl.claim, s)
		}()
	}
	close(start)
	wg.Wait()

	ok := map[string]int{}
	for k, cl := range calls {
		err := errs[k]
		switch {
		case cl.i < 0:
			if !errors.Is(err, producer.ErrUnknownClaim) {
				t.Errorf("settle of unknown claim %s: %v, want ErrUnknownClaim", cl.claim, err)
			}
		case err == nil:
			ok[cl.claim]++
		case !errors.Is(err, producer.ErrUnknownClaim):
			t.Errorf("settle of %s: %v", cl.claim, err)
		}
	}
	es := entries(t, ob)
	for i, o := range offers {
		if ok[o.Claim] != 1 {
			t.Errorf("claim of offer %d settled %d times, want once", i, ok[o.Claim])
		}
		id := o.IdentityList()[0]
		e := es[id]
		s := settlement(i)
		switch s.Action {
		case producer.Complete:
			if e.State != producer.StateDelivered {
				t.Errorf("%s: %s, want delivered", id, e.State)
			}
		case producer.Reject:
			if e.State != producer.StateRejected || e.Reason != s.Reason {
				t.Errorf("%s: %s (%q), want rejected (%q)", id, e.State, e.Reason, s.Reason)
			}
		case producer.Retry:
			if e.State != producer.StatePending || e.Claim != "" || !e.NotBefore.Equal(notBefore) || e.Reason != s.Reason {
				t.Errorf("%s: %+v, want pending, unclaimed, not before %s (%q)", id, e, notBefore, s.Reason)
			}
		}
	}
	if got := poll(t, ob, n); len(got) != 0 {
		t.Errorf("%d offers before the retried events' not-before time, want 0", len(got))
	}
	c.t = notBefore
	if got := poll(t, ob, n); len(got) != n/len(actions) {
		t.Errorf("%d offers after the not-before time, want the %d retried", len(got), n/len(actions))
	}
}
