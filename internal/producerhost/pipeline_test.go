package producerhost

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// settleAfterNextPoll is an outbox whose settle of a full poll's offers
// (one event each) waits until the next poll has begun: a host that polls
// only after settling never gets there (the settle then goes on after 20
// seconds, within the host's settle deadline, and the test fails).
type settleAfterNextPoll struct {
	*producer.Outbox
	mu      sync.Mutex
	polls   int
	pollOf  map[string]int // claim -> the poll that made it
	pollsCh chan struct{}  // closed and replaced at each poll
	stuck   bool           // a settle waited in vain
}

func (s *settleAfterNextPoll) Poll(ctx context.Context, req producer.PollRequest) ([]producer.Offer, error) {
	s.mu.Lock()
	s.polls++
	k := s.polls
	close(s.pollsCh)
	s.pollsCh = make(chan struct{})
	s.mu.Unlock()
	offers, err := s.Outbox.Poll(ctx, req)
	s.mu.Lock()
	for _, o := range offers {
		s.pollOf[o.Claim] = k
	}
	s.mu.Unlock()
	return offers, err
}

func (s *settleAfterNextPoll) SettleBatch(ctx context.Context, settles []producer.ClaimSettlement) []error {
	if len(settles) < PollMax {
		return s.Outbox.SettleAll(ctx, settles)
	}
	guard := time.After(20 * time.Second) // a hang guard, not a timing assertion
	for {
		s.mu.Lock()
		next, ch := s.polls > s.pollOf[settles[0].Claim], s.pollsCh
		s.mu.Unlock()
		if next {
			break
		}
		select {
		case <-ch:
			continue
		case <-guard:
			s.mu.Lock()
			s.stuck = true
			s.mu.Unlock()
		case <-ctx.Done():
		}
		break
	}
	return s.Outbox.SettleAll(ctx, settles)
}

// A plugin with a backlog (more ready events than one poll takes) is
// polled for its next events while the store admits the last ones, and
// settled while the next ones are admitted; every event goes in once, in
// the order of the outbox, and nothing is left claimed when the run ends.
func TestBacklogPipelined(t *testing.T) {
	ob, err := producer.OpenOutbox(t.TempDir(), producer.OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &settleAfterNextPoll{Outbox: ob, pollOf: map[string]int{}, pollsCh: make(chan struct{})}
	h, st := testHost(t, p, 0)
	h.Launch = func(*exec.Cmd, LaunchOptions) (Client, error) { return inProcess{p}, nil }
	n := 3*PollMax + 10
	evs := make([]producer.Event, n)
	for i := range evs {
		id := fmt.Sprintf("d%05d", i)
		evs[i] = producer.Event{Session: "s1", Target: "s1", Identity: producer.Identity("async_delegation", id, ""), Text: "result " + id}
	}
	ctx := context.Background()
	if added, err := ob.AddAll(ctx, evs); err != nil || added != n {
		t.Fatalf("outbox: added %d, %v", added, err)
	}
	rep := h.Run(ctx, []Spec{{Name: "delegation", Path: "/nonexistent", Enabled: true}})
	if len(rep.Failures) > 0 {
		t.Fatalf("failures: %v", rep.Failures[0].Err)
	}
	if p.stuck {
		t.Fatal("a settle waited 20 s for the next poll: the host polled only after settling")
	}
	// Four full polls and the empty one that ends --once.
	if p.polls != 5 {
		t.Errorf("%d polls, want 5", p.polls)
	}
	adms, err := st.ListAdmissions(ctx, "s1", backend.AdmissionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(adms) != n {
		t.Fatalf("%d admissions, want %d", len(adms), n)
	}
	for i, a := range adms {
		if want := producer.Identity("async_delegation", fmt.Sprintf("d%05d", i), ""); len(a.Identities) != 1 || a.Identities[0] != want {
			t.Fatalf("admission %d: identities %v, want [%s]", i, a.Identities, want)
		}
	}
	counts, err := ob.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts.Pending != 0 || counts.Delivered != n {
		t.Fatalf("outbox: %+v, want all %d delivered", counts, n)
	}
}
