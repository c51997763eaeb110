package admission_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// loopStore is a real store whose compression links are bent into a cycle
// (s1 → s1.2 → s1 …), as a corrupt store might hold them.
type loopStore struct{ backend.Store }

func (l loopStore) GetTranscript(ctx context.Context, id string) (backend.Transcript, error) {
	t, err := l.Store.GetTranscript(ctx, id)
	if err == nil && id == "s1.2" {
		t.Child = "s1"
	}
	return t, err
}

// A compression chain that loops is reported as ErrLineageLoop (needs
// attention), naming the chain, by target resolution and by Lineage, in
// both directions, instead of looping.
func TestLineageLoopNamesTheChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := newBolt(t)
	if _, _, err := st.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "u"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Compress(ctx, "s1", "s1.2", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Switch(ctx, "s1", "elsewhere", time.Time{}); err != nil {
		t.Fatal(err)
	}
	svc := &admission.Service{Store: loopStore{st}}
	sess, err := st.GetSession(ctx, "s1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	a := backend.Admission{Session: "s1", Kind: backend.KindAutomation, PinnedTarget: "s1"}
	if _, _, err := svc.ResolveTarget(ctx, sess, a); !errors.Is(err, admission.ErrLineageLoop) || !strings.Contains(err.Error(), "s1 → s1.2 → s1") {
		t.Errorf("ResolveTarget on a looping chain: %v, want ErrLineageLoop naming s1 → s1.2 → s1", err)
	}
	for tr, chain := range map[string]string{"s1": "s1 → s1.2 → s1", "s1.2": "s1.2 → s1"} {
		_, err := svc.Lineage(ctx, tr)
		if !errors.Is(err, admission.ErrLineageLoop) || !errors.Is(err, backend.ErrAttention) || !strings.Contains(err.Error(), chain) {
			t.Errorf("Lineage(%s) on a looping chain: %v, want ErrLineageLoop (attention) naming %s", tr, err, chain)
		}
	}
	// Unbent, the same store resolves and lists the lineage.
	plain := &admission.Service{Store: st}
	if _, mis, err := plain.ResolveTarget(ctx, sess, a); err != nil || !mis {
		t.Errorf("ResolveTarget: misrouted %v, %v; want misrouted (s1's tip is not current)", mis, err)
	}
	if ts, err := plain.Lineage(ctx, "s1.2"); err != nil || len(ts) != 2 || ts[0].ID != "s1" || ts[1].ID != "s1.2" {
		t.Errorf("Lineage(s1.2) = %v, %v; want s1, s1.2", ts, err)
	}
}
