package admissiontest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// dataScenarios: compaction in one pass, lineage loops, and turns claimed
// whose claim's reply was lost.
var dataScenarios = []scenario{
	{"CompactInOnePass", compactInOnePass},
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
