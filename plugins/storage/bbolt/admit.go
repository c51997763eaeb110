package bbolt

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Admit commits each request in one transaction shared with concurrent
// writers; each request is checked in full before anything of it is
// written, so one request's refusal leaves the others untouched.
func (s *Store) Admit(ctx context.Context, reqs []backend.AdmitRequest) ([]backend.AdmitResult, error) {
	out := make([]backend.AdmitResult, len(reqs))
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.ID
		if ids[i] == "" {
			ids[i] = backend.NewAdmissionID(nowOr(r.Now))
		}
	}
	err := s.update(ctx, func(t *txn) error {
		for i, r := range reqs {
			r.ID = ids[i]
			res, err := t.admit(r)
			if err != nil && !isDomain(err) {
				return err
			}
			if err != nil {
				res = backend.AdmitResult{Err: err}
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// admit is one request's atomic step (docs/contract.md §2). It returns a domain error
// only before writing anything.
func (t *txn) admit(r backend.AdmitRequest) (backend.AdmitResult, error) {
	var res backend.AdmitResult
	fail := func(sentinel error, format string, args ...any) (backend.AdmitResult, error) {
		return res, fmt.Errorf("bbolt: admit to session %s: "+format+": %w", append(append([]any{r.Session}, args...), sentinel)...)
	}
	if err := backend.CheckAdmitRequest(r); err != nil {
		return res, fmt.Errorf("bbolt: admit to session %s: %w", r.Session, err)
	}
	if t.get(t.tx.Bucket(bucketAdmissions), []byte(r.ID)) != nil {
		// A request re-sent after its reply was lost (same id, session,
		// kind, principal and payload) finds its own admission, as a
		// duplicate; any other use of a taken id is refused.
		_, _, old, err := t.admission(r.ID)
		if err != nil {
			return res, err
		}
		if old.Session != r.Session || old.Kind != string(r.Kind) || old.Principal != r.Principal || !old.samePayload(r.Payload) {
			return fail(backend.ErrConflict, "admission id %s is taken by another request", r.ID)
		}
		res.Result, res.Admission, res.Duplicates = backend.ResultDuplicate, old.admission(), []string{old.ID}
		if len(r.Identities) > 0 {
			res.Identities = map[string]string{}
			for _, ident := range r.Identities {
				res.Identities[ident] = backend.ResultDuplicate
			}
		}
		return res, nil
	}
	now := nowOr(r.Now)
	sb, rec, err := t.session(r.Session)
	if backend.CodeOf(err) == backend.CodeNotFound {
		if r.Kind != backend.KindHuman || !r.CreateSession {
			return res, fmt.Errorf("bbolt: admit: %w", err)
		}
		if t.transcriptExists(r.Session) {
			return fail(backend.ErrConflict, "a transcript of another session has its id")
		}
		if _, err := t.newSession(r.Session, r.Principal, now); err != nil {
			return res, err
		}
		sb, rec, err = t.session(r.Session)
	}
	if err != nil {
		return res, err
	}
	if act := backend.AdmitAction(r.Kind); !rec.permits(r.Principal, act, r.Producer) {
		return res, fmt.Errorf("bbolt: %w", backend.Forbidden(r.Session, r.Principal, act, r.Producer))
	}
	a := &admRec{
		ID: r.ID, Session: r.Session, Kind: string(r.Kind), Producer: r.Producer, Principal: r.Principal,
		RequestID: r.RequestID, Payload: string(r.Payload), PinnedTarget: r.PinnedTarget,
		Status: string(backend.StatusQueued), AdmittedAt: now, ReplayOf: r.ReplayOf,
	}
	if r.Kind == backend.KindHuman {
		if r.RequestID != "" {
			if id := t.get(sb.Bucket(subRequests), requestKey(r.Principal, r.RequestID)); id != nil {
				old, err := t.admissionByID(sb, id)
				if err != nil {
					return res, err
				}
				if !old.samePayload(r.Payload) {
					return fail(backend.ErrConflict, "request id %q was used with another payload by admission %s", r.RequestID, old.ID)
				}
				res.Result, res.Admission, res.Duplicates = backend.ResultDuplicate, old.admission(), []string{old.ID}
				return res, nil
			}
		}
		cur, err := t.transcript(rec.CurrentTranscript)
		if err != nil {
			return res, err
		}
		if cur.Ended() {
			if !r.Reopen {
				return res, fmt.Errorf("bbolt: admit to session %s: transcript %s ended (%s): %w", r.Session, cur.ID, cur.EndReason, backend.ErrClosed)
			}
			cur.EndedAt, cur.EndReason = time.Time{}, ""
			if err := t.putTranscript(cur); err != nil {
				return res, err
			}
		}
		if err := t.insertAdmission(sb, rec, a); err != nil {
			return res, err
		}
		if r.RequestID != "" {
			if err := sb.Bucket(subRequests).Put(requestKey(r.Principal, r.RequestID), []byte(a.ID)); err != nil {
				return res, err
			}
		}
		res.Result, res.Admission = backend.ResultAdmitted, a.admission()
		return res, nil
	}

	// Automation: identities already held resolve to their admissions,
	// whatever their status; the rest form one new admission.
	res.Identities = map[string]string{}
	var fresh []string
	var first *admRec
	seen := map[string]bool{}
	var freshParts []backend.Part
	for i, ident := range r.Identities {
		if _, dup := res.Identities[ident]; dup {
			continue
		}
		id := t.get(sb.Bucket(subIdentities), []byte(ident))
		if id == nil {
			res.Identities[ident] = backend.ResultAdmitted
			fresh = append(fresh, ident)
			if len(r.Parts) > 0 {
				freshParts = append(freshParts, r.Parts[i])
			}
			continue
		}
		res.Identities[ident] = backend.ResultDuplicate
		old, err := t.admissionByID(sb, id)
		if err != nil {
			return res, err
		}
		if first == nil {
			first = old
		}
		if len(r.Parts) > 0 {
			if backend.PartDiffers(r.Parts[i].Payload, old.admission(), ident) {
				res.PayloadDiffers = true
			}
		}
		if !seen[old.ID] {
			seen[old.ID] = true
			res.Duplicates = append(res.Duplicates, old.ID)
			if len(r.Parts) == 0 && !old.samePayload(r.Payload) {
				res.PayloadDiffers = true
			}
		}
	}
	if len(fresh) == 0 {
		res.Result, res.Admission = backend.ResultDuplicate, first.admission()
		return res, nil
	}
	if a.PinnedTarget == "" {
		a.PinnedTarget = rec.CurrentTranscript
	}
	a.Identities = fresh
	if len(freshParts) > 0 {
		// The admission is made of the parts of the identities not yet
		// held, so a regrouped re-offer carries no result twice.
		a.Payload = string(backend.ComposeParts(freshParts))
	}
	if err := t.insertAdmission(sb, rec, a); err != nil {
		return res, err
	}
	for _, ident := range fresh {
		if err := sb.Bucket(subIdentities).Put([]byte(ident), []byte(a.ID)); err != nil {
			return res, err
		}
	}
	res.Result = backend.ResultAdmitted
	if len(fresh) > 1 {
		res.Result = backend.ResultCoalesced
	}
	res.Admission = a.admission()
	return res, nil
}

// insertAdmission gives a the session's next seq and writes it queued.
func (t *txn) insertAdmission(sb *bolt.Bucket, rec *sessionRec, a *admRec) error {
	a.Seq = rec.NextSeq
	rec.NextSeq++
	rec.Queued++
	appending(sb.Bucket(subAdmissions))
	if err := t.putAdmission(sb, a); err != nil {
		return err
	}
	if err := appending(sb.Bucket(subQueued)).Put(u64(a.Seq), emptyValue); err != nil {
		return err
	}
	if err := appending(t.tx.Bucket(bucketAdmissions)).Put([]byte(a.ID), locationValue(a.Session, a.Seq)); err != nil {
		return err
	}
	return t.putSession(sb, rec)
}
