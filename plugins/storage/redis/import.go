package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Import writes records as Export produced them. A record already present
// with the same content is a no-op; with other content, ErrConflict. The
// records span many slots, so no one script writes them all: the batch is
// checked whole before anything is written, first against the live rules
// (backend.CheckRecords: a bad value, a session or transcript neither in
// the store nor before them in the batch), then record by record against
// what the store holds (each import script run in its check mode, which
// answers as it would and writes nothing), so a conflict at the last
// record refuses the batch with nothing of it written.
func (s *Store) Import(ctx context.Context, recs []backend.Record) (backend.ImportResult, error) {
	var res backend.ImportResult
	if err := backend.CheckRecords(ctx, s, recs); err != nil {
		return res, fmt.Errorf("redis: import: %w", err)
	}
	imp := &importer{s: s, check: true, firstMsg: map[string]bool{}}
	for _, check := range []bool{true, false} {
		imp.check = check
		for i, r := range recs {
			there, err := imp.record(ctx, r)
			if err != nil {
				return res, fmt.Errorf("redis: import: %w", &backend.RecordError{Index: i, Err: err})
			}
			switch {
			case check:
			case there:
				res.Present++
			default:
				res.Written++
			}
		}
	}
	return res, nil
}

// importer writes records, or with check only checks them against the
// store.
type importer struct {
	s        *Store
	check    bool
	firstMsg map[string]bool // transcripts whose first message was checked
}

func (imp *importer) mode() string {
	if imp.check {
		return "check"
	}
	return "write"
}

// record writes (or checks) one record and reports whether it was there
// already with the same content.
func (imp *importer) record(ctx context.Context, r backend.Record) (bool, error) {
	s := imp.s
	switch {
	case r.Session != nil:
		return s.importSession(ctx, r.Session, imp.mode())
	case r.Transcript != nil:
		if imp.check {
			return false, s.checkTranscript(ctx, r.Transcript)
		}
		return s.importTranscript(ctx, r.Transcript)
	case r.Message != nil:
		mode := imp.mode()
		if imp.check && !imp.firstMsg[r.Message.Transcript] {
			imp.firstMsg[r.Message.Transcript], mode = true, "check-first"
		}
		return s.importMessage(ctx, r.Message, mode)
	case r.Admission != nil:
		return imp.admission(ctx, r.Admission)
	case r.Tombstone != nil:
		a, err := backend.TombstoneAdmission(r.Tombstone)
		if err != nil {
			return false, err
		}
		return imp.admission(ctx, &a)
	}
	return false, backend.Errorf(backend.ErrInvalid, "redis: import: empty record")
}

func (imp *importer) admission(ctx context.Context, a *backend.Admission) (bool, error) {
	if imp.check {
		return false, imp.s.checkAdmission(ctx, a)
	}
	return imp.s.importAdmission(ctx, a, "write")
}

// present says whether an import script found its record there already.
func present(res []any) bool { return len(res) > 1 && str(res[1]) == "present" }

// absentInCheck: in the check, a session or transcript the store does not
// hold yet comes earlier in the import (CheckRecords saw to it), and
// nothing of the store can conflict with what it holds.
func absentInCheck(err error) bool { return backend.CodeOf(err) == backend.CodeNotFound }

// checkTranscript answers as importTranscript would, writing nothing: the
// transcript id held by another session, or the transcript present with
// other content, is ErrConflict.
func (s *Store) checkTranscript(ctx context.Context, t *backend.Transcript) error {
	if err := backend.ValidateID("transcript", t.ID); err != nil {
		return err
	}
	owner, _, err := s.transcriptSession(ctx, t.ID)
	switch {
	case absentInCheck(err):
		return nil
	case err != nil:
		return err
	case owner != t.Session:
		return backend.Errorf(backend.ErrConflict, "redis: transcript %s belongs to session %s", t.ID, owner)
	}
	res, err := s.eval(ctx, scriptImportTranscript, []string{s.k.session(t.Session), s.k.transcripts(t.Session)},
		s.k.changes(), t.Session, t.ID, t.Parent, t.Child, nsOf(t.EndedAt), t.EndReason, nsOf(t.CreatedAt), "check")
	if err != nil {
		return s.wrap("check transcript "+t.ID, err)
	}
	if status(res) == "not_found" {
		return nil
	}
	return s.scriptErr(res, "import", "transcript "+t.ID)
}

// checkAdmission answers as importAdmission would, writing nothing: the
// id held by another session's admission, or a conflict in its own
// session (other content, its seq, an identity or request id held by
// another admission), is ErrConflict.
func (s *Store) checkAdmission(ctx context.Context, a *backend.Admission) error {
	if a.ID == "" {
		return backend.Errorf(backend.ErrInvalid, "redis: import admission without id")
	}
	raw, err := s.client.Get(ctx, s.k.admissionOwner(a.ID)).Result()
	if err != nil && err != goredis.Nil {
		return s.wrap("check admission "+a.ID, err)
	}
	if owner, _ := parseClaim(raw); owner != "" && owner != a.Session {
		held, err := s.client.HExists(ctx, s.k.admissions(owner), a.ID).Result()
		if err != nil {
			return s.wrap("check admission "+a.ID, err)
		}
		if held {
			return backend.Errorf(backend.ErrConflict, "redis: import admission %s of session %s: session %s holds that id", a.ID, a.Session, owner)
		}
	}
	_, err = s.importAdmission(ctx, a, "check")
	if absentInCheck(err) {
		return nil
	}
	return err
}

// notImportedBefore turns the ErrNotFound of a record's session or
// transcript into ErrInvalid: the import names it before importing it.
func notImportedBefore(err error, what, parent string) error {
	if backend.CodeOf(err) == backend.CodeNotFound {
		return backend.Errorf(backend.ErrInvalid, "redis: import %s: %s not imported before it", what, parent)
	}
	return err
}

func (s *Store) importSession(ctx context.Context, r *backend.SessionRecord, mode string) (bool, error) {
	if err := backend.ValidateID("session", r.ID); err != nil {
		return false, err
	}
	if mode == "write" {
		if err := s.indexSession(ctx, r.ID); err != nil {
			return false, err
		}
	}
	args := []any{s.k.changes(), r.ID, r.Owner, r.CurrentTranscript, itoa(int64(r.Epoch)),
		itoa(int64(r.Generation)), itoa(int64(r.NextSeq)), nsOf(r.CreatedAt), mode}
	for _, g := range backend.NormalGrants(r.Grants) {
		if err := backend.CheckGrant(g); err != nil {
			return false, fmt.Errorf("redis: import session %s: %w", r.ID, err)
		}
		v, err := grantValue(g)
		if err != nil {
			return false, err
		}
		args = append(args, g.Principal, v)
	}
	res, err := s.eval(ctx, scriptImportSession, []string{s.k.session(r.ID), s.k.grants(r.ID)}, args...)
	if err != nil {
		return false, s.wrap("import session "+r.ID, err)
	}
	return present(res), s.scriptErr(res, "import", "session "+r.ID)
}

func (s *Store) importTranscript(ctx context.Context, t *backend.Transcript) (bool, error) {
	if err := backend.ValidateID("transcript", t.ID); err != nil {
		return false, err
	}
	if err := notImportedBefore(s.requireSession(ctx, t.Session), "transcript "+t.ID, "session "+t.Session); err != nil {
		return false, err
	}
	claim, err := s.claimTranscript(ctx, t.Session, t.ID)
	if err != nil {
		return false, err
	}
	res, err := s.eval(ctx, scriptImportTranscript, []string{s.k.session(t.Session), s.k.transcripts(t.Session)},
		s.k.changes(), t.Session, t.ID, t.Parent, t.Child, nsOf(t.EndedAt), t.EndReason, nsOf(t.CreatedAt), "write")
	if err != nil {
		return false, s.wrap("import transcript "+t.ID, err)
	}
	if err := s.scriptErr(res, "import", "transcript "+t.ID); err != nil {
		s.releaseClaim(ctx, t.ID, claim)
		return false, err
	}
	return present(res), nil
}

func (s *Store) importMessage(ctx context.Context, m *backend.Message, mode string) (bool, error) {
	session, _, err := s.transcriptSession(ctx, m.Transcript)
	if mode != "write" && absentInCheck(err) {
		return false, nil
	}
	if err := notImportedBefore(err, "message "+itoa(int64(m.Seq)), "transcript "+m.Transcript); err != nil {
		return false, err
	}
	if m.Seq == 0 {
		return false, backend.Errorf(backend.ErrInvalid, "redis: import message of %s: seq 0", m.Transcript)
	}
	raw, err := encodeMessage(m.Role, m.Content, m.AdmissionID, m.CreatedAt, m.Metadata)
	if err != nil {
		return false, err
	}
	res, err := s.eval(ctx, scriptImportMessage, []string{s.k.transcripts(session), s.k.messages(session, m.Transcript)},
		s.k.changes(), session, m.Transcript, itoa(int64(m.Seq)), string(m.Role), raw, mode)
	if err != nil {
		return false, s.wrap("import message "+m.Transcript, err)
	}
	return present(res), s.scriptErr(res, "import", "message "+itoa(int64(m.Seq))+" of transcript "+m.Transcript)
}

// importAdmission writes an admission (mode "write"), or checks it against
// its session (mode "check": ErrNotFound when the store has no such
// session yet).
func (s *Store) importAdmission(ctx context.Context, a *backend.Admission, mode string) (bool, error) {
	if a.ID == "" {
		return false, backend.Errorf(backend.ErrInvalid, "redis: import admission without id")
	}
	if mode == "write" {
		if err := notImportedBefore(s.requireSession(ctx, a.Session), "admission "+a.ID, "session "+a.Session); err != nil {
			return false, err
		}
		taken, err := s.writeLookups(ctx, "import admission "+a.ID, a.Session, []backend.AdmitRequest{{ID: a.ID, Identities: a.Identities}})
		if err != nil {
			return false, err
		}
		if holder, ok := taken[a.ID]; ok {
			return false, backend.Errorf(backend.ErrConflict, "redis: import admission %s of session %s: session %s holds that id", a.ID, a.Session, holder)
		}
	}
	rec, err := json.Marshal(recOf(*a))
	if err != nil {
		return false, errInternalf("import admission %s: %v", a.ID, err)
	}
	sid := a.Session
	args := []any{s.k.changes(), sid, a.ID, string(rec), storedPayload(a), strings.Join(a.Identities, "\x00"), mode}
	for _, id := range a.Identities {
		args = append(args, id)
	}
	res, err := s.eval(ctx, scriptImportAdmission, []string{
		s.k.session(sid), s.k.admissions(sid), s.k.payloads(sid), s.k.identityLists(sid),
		s.k.seqs(sid), s.k.queued(sid), s.k.running(sid), s.k.unknown(sid),
		s.k.identities(sid), s.k.requests(sid),
	}, args...)
	if err != nil {
		return false, s.wrap("import admission "+a.ID, err)
	}
	return present(res), s.scriptErr(res, "import", "admission "+a.ID)
}
