package bbolt

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// checkRunning verifies that a settle or requeue of req is not fenced.
func (t *txn) checkRunning(op string, req backend.SettleRequest) (*bolt.Bucket, *sessionRec, *admRec, error) {
	sb, rec, err := t.session(req.Session)
	if err != nil {
		return nil, nil, nil, err
	}
	// An admission the session does not have is not found before any
	// fence is looked at, as settle.lua and requeue.lua decide.
	_, _, a, err := t.admission(req.AdmissionID)
	if err != nil {
		return nil, nil, nil, err
	}
	if a.Session != req.Session {
		return nil, nil, nil, backend.Errorf(backend.ErrNotFound, "bbolt: %s %s: no such admission in session %s", op, req.AdmissionID, rec.ID)
	}
	if req.Epoch != rec.Epoch || req.Generation != rec.Generation {
		return nil, nil, nil, fmt.Errorf("bbolt: %s %s: (epoch %d, generation %d), session %s is at (%d, %d): %w",
			op, req.AdmissionID, req.Epoch, req.Generation, rec.ID, rec.Epoch, rec.Generation, backend.ErrFenced)
	}
	if a.Status != string(backend.StatusRunning) || a.Epoch != req.Epoch || a.Generation != req.Generation {
		return nil, nil, nil, fmt.Errorf("bbolt: %s %s: it is %s under (epoch %d, generation %d): %w",
			op, req.AdmissionID, a.Status, a.Epoch, a.Generation, backend.ErrFenced)
	}
	return sb, rec, a, nil
}

// Settle ends an admission and appends its messages in one transaction.
func (s *Store) Settle(ctx context.Context, req backend.SettleRequest) (backend.Admission, error) {
	if err := backend.CheckSettleRequest(req); err != nil {
		return backend.Admission{}, fmt.Errorf("bbolt: settle %s: %w", req.AdmissionID, err)
	}
	now := nowOr(req.Now)
	var out backend.Admission
	err := s.update(ctx, func(t *txn) (err error) {
		out, err = t.settle(req, now)
		return err
	})
	return out, err
}

// settleSession is what settles change besides their admissions: the
// session record and the transcripts written to, loaded once and saved
// once by a run.
type settleSession struct {
	sb  *bolt.Bucket
	rec *sessionRec
	trs map[string]*backend.Transcript
}

func (t *txn) settleState(session string) (*settleSession, error) {
	sb, rec, err := t.session(session)
	if err != nil {
		return nil, err
	}
	return &settleSession{sb: sb, rec: rec, trs: map[string]*backend.Transcript{}}, nil
}

func (st *settleSession) save(t *txn) error {
	for _, tr := range st.trs {
		if err := t.putTranscript(tr); err != nil {
			return err
		}
	}
	return t.putSession(st.sb, st.rec)
}

// settle is one Settle inside a write transaction: every check before any
// write, so a refusal writes nothing.
func (t *txn) settle(req backend.SettleRequest, now time.Time) (backend.Admission, error) {
	var (
		st  *settleSession
		a   *admRec
		err error
	)
	if req.Direct {
		st, err = t.settleState(req.Session)
	} else {
		st = &settleSession{trs: map[string]*backend.Transcript{}}
		st.sb, st.rec, a, err = t.checkRunning("settle", req)
	}
	if err != nil {
		return backend.Admission{}, err
	}
	out, err := t.settleWith(st, a, req, now)
	if err != nil {
		return out, err
	}
	return out, st.save(t)
}

// settleWith settles one admission (a, already checked running, or with
// req.Direct the queued head, checked here) and writes it; st is changed
// and saved by the caller.
func (t *txn) settleWith(st *settleSession, a *admRec, req backend.SettleRequest, now time.Time) (backend.Admission, error) {
	var (
		out backend.Admission
		err error
	)
	sb, rec := st.sb, st.rec
	if req.Direct {
		if a, err = t.checkHead("settle", sb, rec, req.AdmissionID, req.Epoch); err != nil {
			return out, err
		}
		// A move is told before a viewer, as settle_run.lua tells it: the
		// drainer decides again either way, and then sees the viewer.
		if err := checkMoved(rec, req); err != nil {
			return out, err
		}
		if req.Unwatched {
			if n := t.liveViewers(sb, time.Now()); n > 0 {
				if tr, err := t.transcript(req.DeliveredTo); err == nil && tr.EndedAt.IsZero() {
					return out, fmt.Errorf("bbolt: settle %s: session %s has %d live viewer(s) and transcript %s is open: %w",
						req.AdmissionID, req.Session, n, req.DeliveredTo, backend.ErrWatched)
				}
			}
		}
	}
	if err := checkMoved(rec, req); err != nil {
		return out, err
	}
	// Load every target transcript before writing anything.
	for _, m := range req.Messages {
		if st.trs[m.Transcript] != nil {
			continue
		}
		tr, err := t.transcript(m.Transcript)
		if err == nil && tr.Session != req.Session {
			// Only the session's own transcripts take its messages.
			err = backend.Errorf(backend.ErrNotFound, "transcript %s of session %s", m.Transcript, req.Session)
		}
		if err != nil {
			return out, fmt.Errorf("bbolt: settle %s: %w", req.AdmissionID, err)
		}
		st.trs[m.Transcript] = tr
	}
	if req.Direct {
		rec.Generation++
		a.Epoch, a.Generation, a.StartedAt = rec.Epoch, rec.Generation, now
	}
	if err := t.setStatus(sb, rec, a, backend.StatusDone); err != nil {
		return out, err
	}
	a.Outcome, a.SettledAt, a.Error = string(req.Outcome), now, req.Error
	if req.Mode != "" {
		a.Mode = string(req.Mode)
	}
	if req.DeliveredTo != "" {
		a.DeliveredTo = req.DeliveredTo
	}
	for _, m := range req.Messages {
		if _, err := t.appendMessage(st.trs[m.Transcript], backend.Message{
			Role: m.Role, Content: m.Content, AdmissionID: a.ID, CreatedAt: now, Metadata: m.Metadata,
		}); err != nil {
			return out, err
		}
	}
	if err := t.putAdmission(sb, a); err != nil {
		return out, err
	}
	return a.admission(), nil
}

// Requeue gives a running admission back to the queue at its seq.
func (s *Store) Requeue(ctx context.Context, req backend.SettleRequest) (backend.Admission, error) {
	var out backend.Admission
	err := s.update(ctx, func(t *txn) error {
		sb, rec, a, err := t.checkRunning("requeue", req)
		if err != nil {
			return err
		}
		if err := t.setStatus(sb, rec, a, backend.StatusQueued); err != nil {
			return err
		}
		a.StartedAt, a.Mode, a.DeliveredTo = time.Time{}, "", ""
		return t.saveAdmission(sb, rec, a, &out)
	})
	return out, err
}

// checkMoved is ErrMoved when req expected another current transcript.
func checkMoved(rec *sessionRec, req backend.SettleRequest) error {
	if req.ExpectCurrent != "" && rec.CurrentTranscript != req.ExpectCurrent {
		return fmt.Errorf("bbolt: settle %s: session %s now names transcript %s, not %s: %w",
			req.AdmissionID, req.Session, rec.CurrentTranscript, req.ExpectCurrent, backend.ErrMoved)
	}
	return nil
}
