package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// ReplayRequest says which done admissions to run again: the admissions
// named by IDs, or those of Session whose outcome is one of Outcomes
// (default failed and interrupted) settled at or after Since, replays
// themselves left out (their originals are selected instead).
type ReplayRequest struct {
	IDs      []string
	Session  string
	Outcomes []backend.Outcome
	Since    time.Time
	// Target pins automation replays to this transcript of the session (a
	// misrouted completion re-delivered where it belongs). Human input
	// always runs on the session's current transcript: Target refuses it.
	Target string
	// Again replays an admission that was replayed before (a new replay,
	// numbered after the last); without it a second replay finds the
	// first one and creates nothing.
	Again bool
	// DryRun plans the replays and writes nothing.
	DryRun bool
	// Principal is who replays: it must be allowed to operate on the
	// session of every selected admission (an owner), else ErrForbidden
	// and nothing is replayed. Empty: not checked (the caller has).
	Principal string
}

// Replay results (ReplayResult.Result).
const (
	ReplayReplayed = "replayed"  // a new admission was created
	ReplayExisting = "duplicate" // this replay exists already: nothing new
	ReplayPlanned  = "planned"   // --dry-run: would be created
)

// ReplayResult is one replayed admission.
type ReplayResult struct {
	Original  backend.Admission
	Result    string            // replayed, duplicate or planned
	Admission backend.Admission // the replay (planned: its id, session, target and replay_of)
	Err       error             // this admission's own failure; the rest is empty
}

// replayChunk bounds the requests of one Store.Admit call, so a replay of
// many admissions reports progress and holds the store's lock briefly.
const replayChunk = 256

// ReplayID is the id of the n-th replay (n ≥ 1) of admission orig: derived,
// not random, so a replay re-sent (after a crash, by a second operator, by
// a cron job run twice) names the same admission, and the store's atomic
// "same id, same request → duplicate" rule makes it happen once.
func ReplayID(orig string, n int) string {
	h := sha256.Sum256([]byte("hermesq replay\x00" + orig + "\x00" + strconv.Itoa(n)))
	return hex.EncodeToString(h[:16])
}

// replayIdentity is the identity an automation replay carries: automation
// admissions need one, and the original's identities resolve to the
// original, so the replay gets its own, derived as its id is.
func replayIdentity(orig string, n int) string {
	return "replay:" + orig + ":" + strconv.Itoa(n)
}

// Replay admits each selected done admission again as a new admission with
// replay_of set, in FIFO order, through Store.Admit; the originals are not
// changed. Every selected admission is checked before anything is written:
// one that is not done (ErrConflict), not found (ErrNotFound) or cannot
// take Target (ErrInvalid) fails the whole call. A failure of one request
// in the store (session closed, principal forbidden) is that result's Err.
// progress, when not nil, is told how many admissions each step settled.
func (s *Service) Replay(ctx context.Context, req ReplayRequest, progress func(n int)) ([]ReplayResult, error) {
	origs, err := s.replaySelection(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Target != "" {
		if err := backend.ValidateID("replay target", req.Target); err != nil {
			return nil, err
		}
	}
	if req.Principal != "" {
		checked := map[string]bool{}
		for _, o := range origs {
			if checked[o.Session] {
				continue
			}
			if _, err := Authorize(ctx, s.Store, o.Session, req.Principal, backend.ActOperate, ""); err != nil {
				return nil, fmt.Errorf("replay %s: %w", o.ID, err)
			}
			checked[o.Session] = true
		}
	}
	targets := map[string]bool{} // session\0target: checked
	out := make([]ReplayResult, len(origs))
	reqs := make([]backend.AdmitRequest, len(origs))
	now := s.now()
	for i, o := range origs {
		out[i].Original = o
		if o.Compacted {
			return nil, fmt.Errorf("replay %s: it was compacted: its payload is gone: %w", o.ID, backend.ErrConflict)
		}
		if o.Status != backend.StatusDone {
			return nil, fmt.Errorf("replay %s: it is %s, not done (only a settled admission can be replayed): %w", o.ID, o.Status, backend.ErrConflict)
		}
		r := backend.AdmitRequest{
			Session:   o.Session,
			Kind:      o.Kind,
			Producer:  o.Producer,
			Principal: o.Principal,
			Payload:   o.Payload,
			ReplayOf:  o.ID,
			Now:       now,
		}
		if o.Kind == backend.KindAutomation {
			r.PinnedTarget = o.PinnedTarget
			if req.Target != "" {
				key := o.Session + "\x00" + req.Target
				if !targets[key] {
					t, err := s.Store.GetTranscript(ctx, req.Target)
					if errors.Is(err, backend.ErrNotFound) || (err == nil && t.Session != o.Session) {
						return nil, fmt.Errorf("replay %s: --target %s is not a transcript of session %s: %w", o.ID, req.Target, o.Session, backend.ErrInvalid)
					}
					if err != nil {
						return nil, fmt.Errorf("replay %s: %w", o.ID, err)
					}
					targets[key] = true
				}
				r.PinnedTarget = req.Target
			}
		} else if req.Target != "" {
			return nil, fmt.Errorf("replay %s: --target applies to automation input; human input runs on the session's current transcript: %w", o.ID, backend.ErrInvalid)
		}
		n := 1
		if req.Again {
			if n, err = s.nextReplay(ctx, o.ID); err != nil {
				return nil, err
			}
		}
		r.ID = ReplayID(o.ID, n)
		if o.Kind == backend.KindAutomation {
			r.Identities = []string{replayIdentity(o.ID, n)}
		}
		reqs[i] = r
	}
	if req.DryRun {
		for i, r := range reqs {
			if existing, err := s.Store.GetAdmission(ctx, r.ID); err == nil {
				out[i].Result, out[i].Admission = ReplayExisting, existing
			} else if errors.Is(err, backend.ErrNotFound) {
				out[i].Result = ReplayPlanned
				out[i].Admission = backend.Admission{
					ID: r.ID, Session: r.Session, Kind: r.Kind, Producer: r.Producer, Principal: r.Principal,
					Identities: r.Identities, Payload: r.Payload, PinnedTarget: r.PinnedTarget,
					Status: backend.StatusQueued, ReplayOf: r.ReplayOf,
				}
			} else {
				return nil, fmt.Errorf("replay --dry-run %s: %w", r.ReplayOf, err)
			}
			if progress != nil {
				progress(1)
			}
		}
		return out, nil
	}
	for start := 0; start < len(reqs); start += replayChunk {
		end := min(start+replayChunk, len(reqs))
		res, err := s.Store.Admit(ctx, reqs[start:end])
		if err == nil && len(res) != end-start {
			err = fmt.Errorf("replay: store returned %d results for %d requests: %w", len(res), end-start, backend.ErrInternal)
		}
		if err != nil {
			return out[:start], err
		}
		for j, r := range res {
			i := start + j
			if r.Err != nil {
				out[i].Err = r.Err
				continue
			}
			out[i].Admission = r.Admission
			out[i].Result = ReplayReplayed
			if r.Result == backend.ResultDuplicate {
				out[i].Result = ReplayExisting
			}
		}
		if progress != nil {
			progress(end - start)
		}
	}
	return out, nil
}

// nextReplay is the number of the next replay of orig: one more than the
// last replay that exists.
func (s *Service) nextReplay(ctx context.Context, orig string) (int, error) {
	for n := 1; ; n++ {
		_, err := s.Store.GetAdmission(ctx, ReplayID(orig, n))
		if errors.Is(err, backend.ErrNotFound) {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("replay %s: %w", orig, err)
		}
	}
}

// replaySelection reads the admissions a ReplayRequest names, in the order
// given (ids) or in FIFO order (session).
func (s *Service) replaySelection(ctx context.Context, req ReplayRequest) ([]backend.Admission, error) {
	switch {
	case len(req.IDs) > 0 && req.Session != "":
		return nil, invalidf("replay: give admission ids or a session, not both")
	case len(req.IDs) > 0:
		if len(req.Outcomes) > 0 || !req.Since.IsZero() {
			return nil, invalidf("replay: outcome and since select from a session; they do not apply to admission ids")
		}
		var out []backend.Admission
		seen := map[string]bool{}
		for _, id := range req.IDs {
			if err := backend.ValidateToken("admission id", id); err != nil {
				return nil, err
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			a, err := s.Store.GetAdmission(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("replay %s: %w", id, err)
			}
			out = append(out, a)
		}
		return out, nil
	case req.Session != "":
		if err := backend.ValidateID("session", req.Session); err != nil {
			return nil, err
		}
		outcomes := req.Outcomes
		if len(outcomes) == 0 {
			outcomes = []backend.Outcome{backend.OutcomeFailed, backend.OutcomeInterrupted}
		}
		if _, err := s.Store.GetSession(ctx, req.Session, s.now()); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		as, err := s.Store.ListAdmissions(ctx, req.Session, backend.AdmissionFilter{
			Statuses: []backend.Status{backend.StatusDone},
			Outcomes: outcomes,
		})
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		// A replay that failed again is not selected itself: its original
		// is, and resolves to it, so a replay by session run twice (a cron
		// job) creates nothing the second time; --again runs the original
		// once more.
		as = slices.DeleteFunc(as, func(a backend.Admission) bool {
			return a.ReplayOf != "" || (!req.Since.IsZero() && a.SettledAt.Before(req.Since))
		})
		return as, nil
	}
	return nil, invalidf("replay: give admission ids, or --session")
}
