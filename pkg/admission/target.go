package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// ErrLineageLoop: a lineage read from the store comes back to a transcript
// already met (a damaged store; an import refuses one). The error names the
// chain. Exit 6: an operator must repair it. A drain settles an admission
// whose target cannot be resolved for it failed and goes on.
var ErrLineageLoop = fmt.Errorf("the store holds a lineage that loops; repair it: %w", backend.ErrAttention)

// ResolveTarget says where an admission of session sess is delivered when it
// runs now (docs/contract.md §5). Human input goes to the session's current
// transcript. Automation input pinned to transcript P goes to P when P is
// the current transcript (open or closed), to P's compression tip when that
// tip is current, and nowhere otherwise: misrouted is then true, because the
// session names another lineage and the work must not land in a
// conversation that did not start it. A P that does not exist is misrouted
// too. Errors are the store's, unwrapped by policy: the caller decides that
// ErrUnavailable defers.
func (s *Service) ResolveTarget(ctx context.Context, sess backend.Session, a backend.Admission) (target string, misrouted bool, err error) {
	t, misrouted, err := s.resolve(ctx, sess, a)
	return t.ID, misrouted, err
}

// resolve is ResolveTarget returning the target transcript as read, for the
// open check and the turn's counters.
func (s *Service) resolve(ctx context.Context, sess backend.Session, a backend.Admission) (backend.Transcript, bool, error) {
	return s.resolveVia(ctx, s.Store.GetTranscript, sess, a)
}

// getTranscript reads one transcript: Store.GetTranscript, or a cache of it.
type getTranscript func(ctx context.Context, id string) (backend.Transcript, error)

// cachedTranscripts returns a reader of transcripts that reads each from the
// store once: for resolving a run of admissions against one snapshot.
func (s *Service) cachedTranscripts() getTranscript {
	seen := map[string]backend.Transcript{}
	return func(ctx context.Context, id string) (backend.Transcript, error) {
		if t, ok := seen[id]; ok {
			return t, nil
		}
		t, err := s.Store.GetTranscript(ctx, id)
		if err == nil {
			seen[id] = t
		}
		return t, err
	}
}

// resolveVia is resolve reading transcripts with get.
func (s *Service) resolveVia(ctx context.Context, get getTranscript, sess backend.Session, a backend.Admission) (backend.Transcript, bool, error) {
	current := sess.CurrentTranscript
	pinned := a.PinnedTarget
	if a.Kind == backend.KindHuman || pinned == "" {
		pinned = current
	}
	if pinned == current {
		t, err := get(ctx, current)
		if err != nil {
			return backend.Transcript{}, false, fmt.Errorf("read current transcript %s of session %s: %w", current, sess.ID, err)
		}
		return t, false, nil
	}
	if a.Kind == backend.KindHuman {
		return backend.Transcript{}, false, nil // unreachable: pinned == current
	}
	t, err := get(ctx, pinned)
	if errors.Is(err, backend.ErrNotFound) {
		return backend.Transcript{}, true, nil
	}
	if err != nil {
		return backend.Transcript{}, false, fmt.Errorf("read pinned transcript %s: %w", pinned, err)
	}
	if t.Child == "" {
		// P was never compressed and is not current: another lineage.
		return backend.Transcript{}, true, nil
	}
	down, err := s.walkVia(ctx, get, t, toChild, map[string]bool{t.ID: true})
	if err != nil {
		return backend.Transcript{}, false, err
	}
	t = down[len(down)-1] // the tip
	if t.ID != current {
		return backend.Transcript{}, true, nil
	}
	return t, false, nil
}

// Lineage returns the compression chain through transcript, root first and
// tip last: parents are followed up to the root, children down to the tip.
func (s *Service) Lineage(ctx context.Context, transcript string) ([]backend.Transcript, error) {
	if err := backend.ValidateID("transcript", transcript); err != nil {
		return nil, err
	}
	t, err := s.Store.GetTranscript(ctx, transcript)
	if err != nil {
		return nil, fmt.Errorf("lineage of %s: %w", transcript, err)
	}
	seen := map[string]bool{t.ID: true}
	up, err := s.walk(ctx, t, toParent, seen)
	if err != nil {
		return nil, err
	}
	down, err := s.walk(ctx, t, toChild, seen)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Transcript, 0, len(up)+1+len(down))
	for i := len(up) - 1; i >= 0; i-- {
		out = append(out, up[i])
	}
	out = append(out, t)
	return append(out, down...), nil
}

// link names the next transcript of a lineage in one direction.
type link struct {
	name string
	next func(backend.Transcript) string
}

var (
	toParent = link{"parent", func(t backend.Transcript) string { return t.Parent }}
	toChild  = link{"compression child", func(t backend.Transcript) string { return t.Child }}
)

// walk follows l from t (excluded) to the end of the lineage and returns
// the transcripts met, nearest first. seen holds the ids already met (t's
// included) and grows: a link back to one of them, or a chain longer than
// backend.MaxLineage, is ErrLineageLoop naming the chain, reported instead
// of looping.
func (s *Service) walk(ctx context.Context, t backend.Transcript, l link, seen map[string]bool) ([]backend.Transcript, error) {
	return s.walkVia(ctx, s.Store.GetTranscript, t, l, seen)
}

// walkVia is walk reading transcripts with get.
func (s *Service) walkVia(ctx context.Context, get getTranscript, t backend.Transcript, l link, seen map[string]bool) ([]backend.Transcript, error) {
	var out []backend.Transcript
	chain := []string{t.ID}
	for next := l.next(t); next != ""; next = l.next(t) {
		chain = append(chain, next)
		if len(seen) > backend.MaxLineage || seen[next] {
			return nil, fmt.Errorf("lineage of %s loops: %s (each the %s of the one before): %w",
				chain[0], strings.Join(chain, " → "), l.name, ErrLineageLoop)
		}
		seen[next] = true
		n, err := get(ctx, next)
		if err != nil {
			return nil, fmt.Errorf("read %s %s of %s: %w", l.name, next, t.ID, err)
		}
		out = append(out, n)
		t = n
	}
	return out, nil
}

// AddViewer adds a viewer lease on the session (ttl 0: 60 s). While a live
// viewer is present, automation input runs as a turn instead of a note.
func (s *Service) AddViewer(ctx context.Context, session string, ttl time.Duration) (backend.Viewer, error) {
	if err := backend.ValidateID("session", session); err != nil {
		return backend.Viewer{}, err
	}
	if ttl < 0 {
		return backend.Viewer{}, invalidf("viewer ttl %s is negative", ttl)
	}
	if ttl == 0 {
		ttl = DefaultViewerTTL
	}
	return s.Store.AddViewer(ctx, session, ttl, s.now())
}
