package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// maxLineage bounds a walk along a compression chain, so a corrupt store
// with a cycle is reported instead of looping.
const maxLineage = 100000

// ResolveTarget says where an admission of session sess is delivered when it
// runs now (DESIGN §5). Human input goes to the session's current
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
	current := sess.CurrentTranscript
	pinned := a.PinnedTarget
	if a.Kind == backend.KindHuman || pinned == "" {
		pinned = current
	}
	if pinned == current {
		t, err := s.Store.GetTranscript(ctx, current)
		if err != nil {
			return backend.Transcript{}, false, fmt.Errorf("read current transcript %s of session %s: %w", current, sess.ID, err)
		}
		return t, false, nil
	}
	if a.Kind == backend.KindHuman {
		return backend.Transcript{}, false, nil // unreachable: pinned == current
	}
	t, err := s.Store.GetTranscript(ctx, pinned)
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
	seen := map[string]bool{t.ID: true}
	for t.Child != "" {
		if len(seen) > maxLineage || seen[t.Child] {
			return backend.Transcript{}, false, fmt.Errorf("lineage of %s: compression chain loops at %s: %w", pinned, t.Child, backend.ErrInternal)
		}
		seen[t.Child] = true
		next, err := s.Store.GetTranscript(ctx, t.Child)
		if err != nil {
			return backend.Transcript{}, false, fmt.Errorf("read compression child %s of %s: %w", t.Child, t.ID, err)
		}
		t = next
	}
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
	var up []backend.Transcript
	for p := t; p.Parent != ""; {
		if len(seen) > maxLineage || seen[p.Parent] {
			return nil, fmt.Errorf("lineage of %s: chain loops at %s: %w", transcript, p.Parent, backend.ErrInternal)
		}
		seen[p.Parent] = true
		if p, err = s.Store.GetTranscript(ctx, p.Parent); err != nil {
			return nil, fmt.Errorf("lineage of %s: %w", transcript, err)
		}
		up = append(up, p)
	}
	out := make([]backend.Transcript, 0, len(up)+1)
	for i := len(up) - 1; i >= 0; i-- {
		out = append(out, up[i])
	}
	out = append(out, t)
	for c := t; c.Child != ""; {
		if len(seen) > maxLineage || seen[c.Child] {
			return nil, fmt.Errorf("lineage of %s: chain loops at %s: %w", transcript, c.Child, backend.ErrInternal)
		}
		seen[c.Child] = true
		if c, err = s.Store.GetTranscript(ctx, c.Child); err != nil {
			return nil, fmt.Errorf("lineage of %s: %w", transcript, err)
		}
		out = append(out, c)
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
