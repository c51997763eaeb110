package admissiontest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
)

// dataScenarios: compaction in one pass, lineage loops, and turns claimed
// whose claim's reply was lost.
var dataScenarios = []scenario{
	{"CompactInOnePass", compactInOnePass},
	{"Faults/SettleClaimLostClaimRetryFails", settleClaimLostClaimRetryFails},
	{"Faults/SettleClaimLostGiveBackFails", settleClaimLostGiveBackFails},
	{"Faults/ClaimLostDrainStopped", claimLostDrainStopped},
}

// compactCalls records the requests and results of Store.Compact.
type compactCalls struct {
	backend.Store
	mu    sync.Mutex
	calls []compactCall
}

type compactCall struct {
	req backend.CompactRequest
	res backend.CompactResult
}

func (c *compactCalls) Compact(ctx context.Context, req backend.CompactRequest) (backend.CompactResult, error) {
	res, err := c.Store.Compact(ctx, req)
	c.mu.Lock()
	c.calls = append(c.calls, compactCall{req, res})
	c.mu.Unlock()
	return res, err
}

// A compaction over several batches selects what one call over the whole
// session selects (every done admission settled before the cutoff), and
// passes over the session once: each call starts after the seq the last
// one stopped at, so none examines an admission an earlier one examined.
func compactInOnePass(t *testing.T, h *harness) {
	h.openSession("s1")
	var want []string
	for i := range 23 {
		a := h.human("s1", "input "+itoa(i)).Admission
		if i%5 == 3 {
			continue // stays queued
		}
		if _, err := h.store.Cancel(h.ctx, a.ID, time.Now()); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		want = append(want, a.ID)
	}
	rec := &compactCalls{Store: h.store}
	svc := &admission.Service{Store: rec, Now: func() time.Time { return time.Now().Add(time.Hour) }}
	rep, err := svc.Compact(h.ctx, admission.CompactRequest{OlderThan: time.Minute, Session: "s1", Batch: 4})
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	if rep.Compacted != len(want) || len(rep.Sessions) != 1 || !slices.Equal(rep.Sessions[0].Compacted, want) {
		t.Errorf("compacted %d: %+v, want %d: %v", rep.Compacted, rep.Sessions, len(want), want)
	}
	// 23 admissions, 4 a call: 6 calls, each after the previous one's end.
	if len(rec.calls) != 6 {
		t.Errorf("%d calls of Store.Compact, want 6 (23 admissions, 4 a call)", len(rec.calls))
	}
	var after uint64
	for i, c := range rec.calls {
		if c.req.After != after || c.req.Scan != 4 {
			t.Errorf("call %d: after seq %d, scan %d; want after %d (where call %d stopped), scan 4", i, c.req.After, c.req.Scan, after, i-1)
		}
		if c.res.Next != 0 && c.res.Next != c.req.After+4 {
			t.Errorf("call %d after seq %d stopped at seq %d, want %d", i, c.req.After, c.res.Next, c.req.After+4)
		}
		after = c.res.Next
	}
	if after != 0 {
		t.Errorf("the last call's next seq is %d, want 0 (the end)", after)
	}
	if left := h.admissions("s1", backend.AdmissionFilter{}); len(left) != 4 {
		t.Errorf("%d admissions listed after compaction, want the 4 queued", len(left))
	}
}

// DamageLineage rewrites transcript id's parent and child in st (the real
// store) in place, bypassing every check, as a store written before imports
// refused loops may hold them.
type DamageLineage func(ctx context.Context, st backend.Store, id, parent, child string) error

// RunDamagedLineage runs the scenarios of a store already holding a loop in
// a lineage, planted with damage.
func RunDamagedLineage(t *testing.T, newStore func(t *testing.T) backend.Store, damage DamageLineage) {
	t.Run("LineageLoop", func(t *testing.T) { lineageLoop(t, newHarness(t, newStore), damage) })
}

// A loop in a lineage the store holds (s1's compression child c1 names s1
// as its own child) is an error naming the chain, scoped to what meets it:
// Lineage says so (attention, not an internal error); a drain settles the
// completion pinned into the loop failed with the chain in its error and
// goes on with the session's queue, and drain --all with the other
// sessions: nothing else stops.
func lineageLoop(t *testing.T, h *harness, damage DamageLineage) {
	h.openSession("s1")
	if _, err := h.store.Compress(h.ctx, "s1", "c1", time.Now()); err != nil {
		t.Fatalf("compress: %v", err)
	}
	pinned := h.offer("s1", "process", []string{ident("p", "1")}, "DONE", "s1").Admission
	after := h.human("s1", "AFTER").Admission
	other := h.human("s2", "OTHER").Admission
	if err := damage(h.ctx, h.store, "c1", "s1", "s1"); err != nil {
		t.Fatalf("plant the loop: %v", err)
	}

	_, err := h.svc.Lineage(h.ctx, "s1")
	if !errors.Is(err, admission.ErrLineageLoop) || !errors.Is(err, backend.ErrAttention) || errors.Is(err, backend.ErrInternal) {
		t.Errorf("lineage of s1: %v, want ErrLineageLoop (attention)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "s1 → c1 → s1") {
		t.Errorf("lineage of s1: %v, want the chain s1 → c1 → s1 named", err)
	}

	reps, err := h.svc.DrainAll(h.ctx, h.opts(), 1)
	if !errors.Is(err, backend.ErrAttention) || errors.Is(err, backend.ErrInternal) {
		t.Errorf("drain --all: %v, want attention (a failed admission), not internal", err)
	}
	if len(reps) != 2 {
		t.Errorf("drain --all: %d reports, want 2 (s1, s2)", len(reps))
	}
	a := h.wantState(pinned.ID, "done/failed/")
	if !strings.Contains(a.Error, "s1 → c1 → s1") {
		t.Errorf("the pinned admission's error %q does not name the chain s1 → c1 → s1", a.Error)
	}
	h.wantState(after.ID, "done/completed/turn")
	h.wantState(other.ID, "done/completed/turn")
}

// A joint settle-and-claim commits and its reply is lost; the claim sent
// again on its own then fails transiently until the settle deadline. The
// turn it claimed never started: it is given back, and the drain runs it
// (once) and the rest, instead of leaving it running under its live epoch
// (the drain exiting busy, the next drainer pausing on it as unknown).
func settleClaimLostClaimRetryFails(t *testing.T, h *harness) {
	settleClaimLost(t, h, false)
}

// As settleClaimLostClaimRetryFails, and the read that would give the turn
// back at once fails too: the next step finds it running under the
// drainer's own epoch, never started, and gives it back then.
func settleClaimLostGiveBackFails(t *testing.T, h *harness) {
	settleClaimLost(t, h, true)
}

func settleClaimLost(t *testing.T, h *harness, readFails bool) {
	h.openSession("s1")
	var ids []string
	for _, text := range []string{"A", "B", "C"} {
		ids = append(ids, h.human("s1", text).Admission.ID)
	}
	h.faults.Inject(backendtest.Fault{Method: "SettleClaim", Mode: backendtest.FailAfter})
	// The second claim: A's own is the first.
	h.faults.Inject(backendtest.Fault{Method: "Claim", Nth: 2, Mode: backendtest.Stall, Stall: waitLimit})
	if readFails {
		// The first read is the settle's (found committed); the second,
		// the give-back's.
		h.faults.Inject(backendtest.Fault{Method: "GetAdmission", Nth: 2, Mode: backendtest.Stall, Stall: waitLimit})
	}
	opt := h.opts()
	opt.SettleTimeout = time.Second
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if h.faults.Struck("SettleClaim") != 1 || h.faults.Struck("Claim") != 1 {
		t.Fatalf("faults struck: settle-claim %d, claim %d; want 1, 1", h.faults.Struck("SettleClaim"), h.faults.Struck("Claim"))
	}
	if readFails && h.faults.Struck("GetAdmission") != 1 {
		t.Fatalf("the give-back's read was not struck")
	}
	if rep.Turns != 3 {
		t.Errorf("%d turns, want 3", rep.Turns)
	}
	for _, id := range ids {
		h.wantState(id, "done/completed/turn")
	}
	h.wantStrings("handler runs", h.turnTexts(), []string{"A/0", "B/0", "C/0"})
}

// A plain claim commits and its reply is lost; its retry stalls and the
// drain is stopped meanwhile. The turn never started: it is back in the
// queue, not running, and the next drain runs it once (no unknown, no
// pause).
func claimLostDrainStopped(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "Claim", Mode: backendtest.FailAfter})
	h.faults.Inject(backendtest.Fault{Method: "Claim", Mode: backendtest.Stall, Stall: waitLimit})
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.svc.Drain(ctx, "s1", h.opts())
		done <- err
	}()
	h.eventually("the claim's retry stalls", func() bool { return h.faults.Struck("Claim") == 2 })
	cancel()
	if err := <-done; err == nil {
		t.Fatalf("drain stopped during the claim's retry: no error")
	}
	h.wantState(r.Admission.ID, "queued//")
	if n := len(h.turns()); n != 0 {
		t.Fatalf("the handler ran %d times before the claim was seen", n)
	}
	h.drain("s1")
	h.oneTurn("s1", r.Admission.ID, "IN")
}
