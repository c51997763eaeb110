package bbolt

import (
	"context"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// DefaultLeaseTTL is the drain lease TTL when a request gives none.
const DefaultLeaseTTL = backend.DefaultLeaseTTL

// GetAdmission returns one admission.
func (s *Store) GetAdmission(ctx context.Context, id string) (backend.Admission, error) {
	var out backend.Admission
	err := s.view(ctx, func(t *txn) error {
		_, _, a, err := t.admission(id)
		if err != nil {
			return err
		}
		out = a.admission()
		return nil
	})
	return out, err
}

// ListAdmissions returns a session's admissions in seq order, filtered.
func (s *Store) ListAdmissions(ctx context.Context, session string, f backend.AdmissionFilter) ([]backend.Admission, error) {
	var out []backend.Admission
	err := s.view(ctx, func(t *txn) error {
		out = nil
		sb, _, err := t.session(session)
		if err != nil {
			return err
		}
		match := func(a *admRec) bool {
			if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, backend.Status(a.Status)) {
				return false
			}
			return len(f.Outcomes) == 0 || slices.Contains(f.Outcomes, backend.Outcome(a.Outcome))
		}
		// Walk the queued index when only queued admissions are asked for
		// (the drainer's head lookup); else every admission.
		index := sb.Bucket(subAdmissions)
		if len(f.Statuses) == 1 && f.Statuses[0] == backend.StatusQueued {
			index = sb.Bucket(subQueued)
			t.memo = &s.memo // the drainer settles what it lists next
		}
		c := index.Cursor()
		for k, _ := c.Seek(u64(f.AfterSeq + 1)); k != nil; k, _ = c.Next() {
			if f.Limit > 0 && len(out) >= f.Limit {
				break
			}
			a, err := t.admissionAt(sb, fromU64(k))
			if err != nil {
				return err
			}
			if a.PayloadSHA1 == "" && match(a) { // tombstones are not listed
				out = append(out, a.admission())
			}
		}
		return nil
	})
	return out, err
}

// FindIdentity returns the admission holding identity in one session, or in
// any session (the first by session id) when session is empty.
func (s *Store) FindIdentity(ctx context.Context, session, identity string) (backend.Admission, error) {
	var out backend.Admission
	err := s.view(ctx, func(t *txn) error {
		look := func(name []byte) (bool, error) {
			sb := t.sessionBucket(string(name))
			id := sb.Bucket(subIdentities).Get([]byte(identity))
			if id == nil {
				return false, nil
			}
			a, err := t.admissionByID(sb, id)
			if err != nil {
				return false, err
			}
			out = a.admission()
			return true, nil
		}
		if session != "" {
			if t.sessionBucket(session) == nil {
				return backend.Errorf(backend.ErrNotFound, "session %s", session)
			}
			if ok, err := look([]byte(session)); ok || err != nil {
				return err
			}
		} else {
			c := t.tx.Bucket(bucketSessions).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v != nil {
					continue
				}
				if ok, err := look(k); ok || err != nil {
					return err
				}
			}
		}
		return backend.Errorf(backend.ErrNotFound, "identity %q", identity)
	})
	return out, err
}

// AcquireLease takes the drain lease at epoch+1; admissions left running by
// an older epoch become unknown in the same transaction.
func (s *Store) AcquireLease(ctx context.Context, req backend.LeaseRequest) (backend.Lease, error) {
	now := nowOr(req.Now)
	var out backend.Lease
	err := s.updateSession(ctx, req.Session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if !rec.permits(req.Principal, backend.ActDrain, "") {
			return fmt.Errorf("bbolt: acquire lease: %w", backend.Forbidden(req.Session, req.Principal, backend.ActDrain, ""))
		}
		if rec.LeaseHolder != "" && rec.LeaseHolder != req.Holder && now.Before(rec.LeaseExpiresAt) {
			return fmt.Errorf("bbolt: acquire lease of session %s: held by %s until %s: %w",
				req.Session, rec.LeaseHolder, rec.LeaseExpiresAt.Format(time.RFC3339), backend.ErrLeaseHeld)
		}
		rec.Epoch++
		rec.LeaseHolder, rec.LeaseExpiresAt = req.Holder, now.Add(ttlOr(req.TTL, backend.DefaultLeaseTTL))
		rec.LeasePrincipal = req.Principal
		out = backend.Lease{Session: req.Session, Holder: req.Holder, Epoch: rec.Epoch, ExpiresAt: rec.LeaseExpiresAt}
		var running []uint64
		_ = sb.Bucket(subActive).ForEach(func(k, _ []byte) error {
			running = append(running, fromU64(k))
			return nil
		})
		for _, seq := range running {
			a, err := t.admissionAt(sb, seq)
			if err != nil {
				return err
			}
			if a.Status != string(backend.StatusRunning) {
				continue
			}
			if err := t.setStatus(sb, rec, a, backend.StatusUnknown); err != nil {
				return err
			}
			if err := t.putAdmission(sb, a); err != nil {
				return err
			}
			out.Recovered = append(out.Recovered, a.ID)
		}
		return t.putSession(sb, rec)
	})
	return out, err
}

// RenewLease extends the lease held by (holder, epoch).
func (s *Store) RenewLease(ctx context.Context, req backend.LeaseRequest) (backend.Lease, error) {
	now := nowOr(req.Now)
	var out backend.Lease
	err := s.updateSession(ctx, req.Session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if rec.Epoch != req.Epoch || rec.LeaseHolder != req.Holder {
			return fmt.Errorf("bbolt: renew lease of session %s: epoch %d of %q, current %d of %q: %w",
				req.Session, req.Epoch, req.Holder, rec.Epoch, rec.LeaseHolder, backend.ErrFenced)
		}
		if exp := now.Add(ttlOr(req.TTL, backend.DefaultLeaseTTL)); exp.After(rec.LeaseExpiresAt) {
			rec.LeaseExpiresAt = exp
		}
		out = backend.Lease{Session: req.Session, Holder: req.Holder, Epoch: rec.Epoch, ExpiresAt: rec.LeaseExpiresAt}
		return t.putSession(sb, rec)
	})
	return out, err
}

// ReleaseLease gives up the lease of (holder, epoch), if still held.
func (s *Store) ReleaseLease(ctx context.Context, req backend.LeaseRequest) error {
	return s.updateSession(ctx, req.Session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if rec.Epoch != req.Epoch || rec.LeaseHolder != req.Holder {
			return nil
		}
		rec.LeaseHolder, rec.LeaseExpiresAt = "", time.Time{}
		return t.putSession(sb, rec)
	})
}

// checkHead verifies that id may start now under epoch: the epoch is
// current, the lease's principal may still drain the session, nothing
// runs, and id is the FIFO head.
func (t *txn) checkHead(op string, sb *bolt.Bucket, rec *sessionRec, id string, epoch uint64) (*admRec, error) {
	if epoch != rec.Epoch {
		return nil, fmt.Errorf("bbolt: %s %s: epoch %d, session %s is at epoch %d: %w", op, id, epoch, rec.ID, rec.Epoch, backend.ErrFenced)
	}
	if !rec.permits(rec.LeasePrincipal, backend.ActDrain, "") {
		return nil, fmt.Errorf("bbolt: %s %s: %w", op, id, backend.Forbidden(rec.ID, rec.LeasePrincipal, backend.ActDrain, ""))
	}
	if rec.Running+rec.Unknown > 0 {
		return nil, fmt.Errorf("bbolt: %s %s: session %s has %d running, %d unknown: %w", op, id, rec.ID, rec.Running, rec.Unknown, backend.ErrBusy)
	}
	session, _, err := t.locate(id)
	if err != nil && backend.CodeOf(err) != backend.CodeNotFound {
		return nil, err
	}
	if err != nil || session != rec.ID {
		return nil, backend.Errorf(backend.ErrNotFound, "bbolt: %s %s: no such admission in session %s", op, id, rec.ID)
	}
	seq := t.head(sb)
	if seq == 0 {
		return nil, fmt.Errorf("bbolt: %s %s: session %s has nothing queued: %w", op, id, rec.ID, backend.ErrNotHead)
	}
	a, err := t.admissionAt(sb, seq)
	if err != nil {
		return nil, err
	}
	if a.ID != id {
		return nil, fmt.Errorf("bbolt: %s %s: the head of session %s is %s: %w", op, id, rec.ID, a.ID, backend.ErrNotHead)
	}
	return a, nil
}

// Claim moves the FIFO head to running under (epoch, generation+1).
func (s *Store) Claim(ctx context.Context, req backend.ClaimRequest) (backend.Admission, error) {
	var out backend.Admission
	err := s.update(ctx, func(t *txn) (err error) {
		out, err = t.claim(req)
		return err
	})
	return out, err
}

func (t *txn) claim(req backend.ClaimRequest) (out backend.Admission, err error) {
	sb, rec, err := t.session(req.Session)
	if err != nil {
		return out, err
	}
	a, err := t.checkHead("claim", sb, rec, req.AdmissionID, req.Epoch)
	if err != nil {
		return out, err
	}
	rec.Generation++
	if err := t.setStatus(sb, rec, a, backend.StatusRunning); err != nil {
		return out, err
	}
	a.Epoch, a.Generation, a.StartedAt = rec.Epoch, rec.Generation, nowOr(req.Now)
	a.Mode, a.DeliveredTo = string(req.Mode), req.DeliveredTo
	err = t.saveAdmission(sb, rec, a, &out)
	return out, err
}

// SettleClaim settles req and claims next in one transaction: one commit
// for the end of a turn and the start of the next.
func (s *Store) SettleClaim(ctx context.Context, req backend.SettleRequest, next backend.ClaimRequest) (backend.SettleClaimResult, error) {
	if err := backend.CheckSettleClaimRequest(req, next); err != nil {
		return backend.SettleClaimResult{}, fmt.Errorf("bbolt: %w", err)
	}
	now := nowOr(req.Now)
	var out backend.SettleClaimResult
	err := s.update(ctx, func(t *txn) (err error) {
		out = backend.SettleClaimResult{}
		if out.Settled, err = t.settle(req, now); err != nil {
			return err
		}
		// A refused claim (a domain error, checked before it writes)
		// leaves the settle to commit alone.
		out.Claimed, out.ClaimErr = t.claim(next)
		if out.ClaimErr != nil && !isDomain(out.ClaimErr) {
			return out.ClaimErr
		}
		return nil
	})
	if err != nil {
		return backend.SettleClaimResult{}, err
	}
	return out, nil
}

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

// SettleRun settles a run of queued heads, in order, in one transaction; it
// stops at the first request that fails with a result of the contract and
// commits the ones before it. The session record and the transcripts are
// read once and written once for the whole run.
func (s *Store) SettleRun(ctx context.Context, reqs []backend.SettleRequest) ([]backend.Admission, error) {
	for _, req := range reqs {
		if err := checkRunRequest(req, reqs[0].Session); err != nil {
			return nil, fmt.Errorf("bbolt: settle run: %w", err)
		}
	}
	if len(reqs) == 0 {
		return []backend.Admission{}, nil
	}
	var (
		out     []backend.Admission
		stopped error
	)
	err := s.update(ctx, func(t *txn) error {
		out, stopped = make([]backend.Admission, 0, len(reqs)), nil
		st, err := t.settleState(reqs[0].Session)
		if err != nil {
			if isDomain(err) {
				stopped = err
				return nil
			}
			return err
		}
		for _, req := range reqs {
			a, err := t.settleWith(st, nil, req, nowOr(req.Now))
			if err != nil && !isDomain(err) {
				out = nil
				return err // rolls the run back
			}
			if err != nil {
				stopped = err
				break
			}
			out = append(out, a)
		}
		if len(out) == 0 {
			return nil
		}
		return st.save(t)
	})
	if err != nil {
		return nil, err
	}
	return out, stopped
}

// checkRunRequest checks one request of a SettleRun: well formed, direct,
// of the run's session.
func checkRunRequest(req backend.SettleRequest, session string) error {
	if err := backend.CheckSettleRequest(req); err != nil {
		return fmt.Errorf("admission %s: %w", req.AdmissionID, err)
	}
	if !req.Direct {
		return backend.Errorf(backend.ErrInvalid, "admission %s: a run settles queued heads only (direct)", req.AdmissionID)
	}
	if req.Session != session {
		return backend.Errorf(backend.ErrInvalid, "admission %s: session %s in a run of session %s", req.AdmissionID, req.Session, session)
	}
	return nil
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

// updateAdmission runs fn on an admission (by id) and its session in a write
// transaction (grouped as update); ErrNotFound when it is absent.
func (s *Store) updateAdmission(ctx context.Context, id string, fn func(t *txn, sb *bolt.Bucket, rec *sessionRec, a *admRec) error) error {
	return s.update(ctx, func(t *txn) error {
		sb, rec, a, err := t.admission(id)
		if err != nil {
			return err
		}
		return fn(t, sb, rec, a)
	})
}

// saveAdmission writes a changed admission and its session, and sets *out
// to the admission as written.
func (t *txn) saveAdmission(sb *bolt.Bucket, rec *sessionRec, a *admRec, out *backend.Admission) error {
	if err := t.putAdmission(sb, a); err != nil {
		return err
	}
	*out = a.admission()
	return t.putSession(sb, rec)
}

// Resolve settles an unknown admission, or puts it back in the queue.
func (s *Store) Resolve(ctx context.Context, id string, as backend.Resolution, now time.Time) (backend.Admission, error) {
	switch as {
	case backend.ResolveCompleted, backend.ResolveInterrupted, backend.ResolveRequeue:
	default:
		return backend.Admission{}, backend.Errorf(backend.ErrInvalid, "bbolt: resolve %s: resolution %q", id, as)
	}
	now = nowOr(now)
	var out backend.Admission
	err := s.updateAdmission(ctx, id, func(t *txn, sb *bolt.Bucket, rec *sessionRec, a *admRec) error {
		if a.Status != string(backend.StatusUnknown) {
			return backend.Errorf(backend.ErrConflict, "bbolt: resolve %s: it is %s, not unknown", id, a.Status)
		}
		if as == backend.ResolveRequeue {
			if err := t.setStatus(sb, rec, a, backend.StatusQueued); err != nil {
				return err
			}
			a.StartedAt, a.Mode, a.DeliveredTo = time.Time{}, "", ""
		} else {
			if err := t.setStatus(sb, rec, a, backend.StatusDone); err != nil {
				return err
			}
			a.Outcome, a.SettledAt = string(as), now
		}
		return t.saveAdmission(sb, rec, a, &out)
	})
	return out, err
}

// Cancel settles a queued admission as cancelled.
func (s *Store) Cancel(ctx context.Context, id string, now time.Time) (backend.Admission, error) {
	now = nowOr(now)
	var out backend.Admission
	err := s.updateAdmission(ctx, id, func(t *txn, sb *bolt.Bucket, rec *sessionRec, a *admRec) error {
		if a.Status != string(backend.StatusQueued) {
			return backend.Errorf(backend.ErrConflict, "bbolt: cancel %s: it is %s, not queued", id, a.Status)
		}
		if err := t.setStatus(sb, rec, a, backend.StatusDone); err != nil {
			return err
		}
		a.Outcome, a.SettledAt = string(backend.OutcomeCancelled), now
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
