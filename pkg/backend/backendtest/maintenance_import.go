package backendtest

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// maintenanceImportTests: an import is checked whole, against the store too, before
// anything of it is written.
var maintenanceImportTests = []suiteTest{
	{name: "Import/LineageLoops", fn: testImportLineageLoops},
	{name: "Import/ConflictWritesNothing", fresh: testImportConflictWritesNothing},
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/ImportOutOfOrder", fn: testImportOutOfOrder},
	{name: "Edges/ImportKeepsIndexesWhole", fn: testImportKeepsIndexesWhole},
}

// An import that would leave a loop in a lineage (a transcript its own
// parent or child, two transcripts each the other's parent, a record that
// closes a loop with transcripts the store holds) is ErrInvalid, naming
// the chain, and writes nothing.
func testImportLineageLoops(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	if _, err := s.Compress(ctxOf(t), "s1", "c1", T0); err != nil {
		t.Fatalf("compress: %v", err)
	}
	before := export(t, s)
	sess := func(id, current string) backend.Record {
		return backend.Record{Session: &backend.SessionRecord{ID: id, Owner: Owner, Grants: []backend.Grant{},
			CurrentTranscript: current, NextSeq: 1, CreatedAt: T0}}
	}
	tr := func(id, session, parent, child string) backend.Record {
		return backend.Record{Transcript: &backend.Transcript{ID: id, Session: session, Parent: parent, Child: child, CreatedAt: T0}}
	}
	stored := getTranscript(t, s, "c1")
	looped := stored
	looped.Child = "s1" // s1's child is c1: c1 → s1 → c1
	for _, c := range []struct {
		name string
		recs []backend.Record
		msg  string
	}{
		{"its own parent", []backend.Record{sess("n1", "n1"), tr("n1", "n1", "n1", "")}, "transcript n1: its own parent"},
		{"its own child", []backend.Record{sess("n1", "n1"), tr("n1", "n1", "", "n1")}, "transcript n1: its own child"},
		{"each the other's parent", []backend.Record{sess("x", "X1"), tr("X1", "x", "X1c", ""), tr("X1c", "x", "X1", "")},
			"X1 → X1c → X1"},
		{"each the other's child", []backend.Record{sess("x", "X1"), tr("X1", "x", "", "X1c"), tr("X1c", "x", "", "X1")},
			"X1 → X1c → X1"},
		{"a loop with the store's transcripts", []backend.Record{{Transcript: &looped}}, "c1 → s1 → c1"},
	} {
		err := importErr(t, s, c.recs)
		wantErr(t, "import "+c.name, err, backend.ErrInvalid)
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("import %s: %v, want %q in it", c.name, err, c.msg)
		}
	}
	diff(t, "the store after the refused imports", before, export(t, s))
}

// A batch whose last record conflicts with the store (a stale copy of a
// session the store holds, its epoch gone up since) is refused, ErrConflict,
// with nothing of it written: not the new session before it, nor that
// session's transcript or queued admission.
func testImportConflictWritesNothing(t *testing.T, newStore func(t *testing.T) backend.Store) {
	s := newStore(t)
	openSession(t, s, "old")
	human(t, s, "old", "old input")
	stale := export(t, s)
	acquire(t, s, "old", "A", T0) // the epoch goes up: the copy is stale
	before := export(t, s)

	other := newStore(t)
	openSession(t, other, "n1")
	a := human(t, other, "n1", "new input")
	recs := append(export(t, other), stale...)
	if recs[0].Session == nil || recs[0].Session.ID != "n1" {
		t.Fatalf("the new session's records do not come first: %+v", recs[0])
	}

	err := importErr(t, s, recs)
	wantErr(t, "import a new session and then a stale copy of one the store holds", err, backend.ErrConflict)
	diff(t, "the store after the refused import", before, export(t, s))
	if _, err := s.GetSession(ctxOf(t), "n1", time.Time{}); err == nil {
		t.Errorf("the refused import wrote session n1")
	}
	if _, err := s.GetAdmission(ctxOf(t), a.ID); err == nil {
		t.Errorf("the refused import wrote n1's admission")
	}
	if _, err := s.GetTranscript(ctxOf(t), "n1"); err == nil {
		t.Errorf("the refused import wrote n1's transcript")
	}
	// Without the stale copy it imports; again, it writes nothing and
	// says so.
	fresh := recs[:len(recs)-len(stale)]
	res, err := s.Import(ctxOf(t), fresh)
	noErr(t, "import the new session alone", err)
	getAdmission(t, s, a.ID)
	diff(t, "first import", backend.ImportResult{Written: len(fresh)}, res)
	res, err = s.Import(ctxOf(t), fresh)
	noErr(t, "import it again", err)
	diff(t, "second import", backend.ImportResult{Present: len(fresh)}, res)
	res, err = s.Import(ctxOf(t), append(slices.Clone(fresh), stale[len(stale)-1]))
	noErr(t, "import it again with one record of old", err)
	diff(t, "third import", backend.ImportResult{Present: len(fresh) + 1}, res)
}

// An import whose record comes before the record it belongs to (a
// transcript before its session…) is malformed input, ErrInvalid, and
// writes nothing: Export writes every session before its records.
func testImportOutOfOrder(t *testing.T, s backend.Store) {
	recs := map[string]backend.Record{
		"transcript before its session": {Transcript: &backend.Transcript{ID: "t1", Session: "s9", CreatedAt: T0}},
		"message before its transcript": {Message: &backend.Message{Transcript: "t2", Seq: 1, Role: backend.RoleNote, Content: "n", CreatedAt: T0}},
		"admission before its session": {Admission: &backend.Admission{ID: "0123456789abcdef0123456789abcdef", Session: "s9", Seq: 1,
			Kind: backend.KindHuman, Principal: Owner, Payload: Payload("x"), Status: backend.StatusQueued, AdmittedAt: T0}},
		"empty record": {},
	}
	for what, r := range recs {
		err := importErr(t, s, []backend.Record{r})
		wantErr(t, "import a "+what, err, backend.ErrInvalid)
	}
	if _, err := s.GetTranscript(ctxOf(t), "t1"); err == nil {
		t.Errorf("a refused import created transcript t1")
	}
	if _, err := s.GetAdmission(ctxOf(t), "0123456789abcdef0123456789abcdef"); err == nil {
		t.Errorf("a refused import created its admission")
	}
	// A batch is refused before anything of it is written.
	err := importErr(t, s, []backend.Record{
		{Session: &backend.SessionRecord{ID: "s5", Owner: Owner, Grants: []backend.Grant{}, CurrentTranscript: "s5", NextSeq: 1, CreatedAt: T0}},
		{Transcript: &backend.Transcript{ID: "s5", Session: "s5", CreatedAt: T0}},
		recs["transcript before its session"],
	})
	wantErr(t, "import a batch with a record out of order", err, backend.ErrInvalid)
	if ss, err := s.ListSessions(ctxOf(t), time.Time{}); err != nil || len(ss) != 0 {
		t.Errorf("sessions after refused imports: %v, %v", ss, err)
	}
	if _, err := s.GetTranscript(ctxOf(t), "s5"); err == nil {
		t.Errorf("a refused batch wrote transcript s5")
	}
}

// An import never breaks an index: a message that would leave a gap in its
// transcript is ErrInvalid; an identity, a request id or a seq already held
// by another admission of the session is ErrConflict, and the holder keeps
// it.
func testImportKeepsIndexesWhole(t *testing.T, s backend.Store) {
	session := func(id string) backend.Record {
		return backend.Record{Session: &backend.SessionRecord{ID: id, Owner: Owner, Grants: []backend.Grant{}, CurrentTranscript: id, NextSeq: 5, CreatedAt: T0}}
	}
	transcript := func(id string) backend.Record {
		return backend.Record{Transcript: &backend.Transcript{ID: id, Session: id, CreatedAt: T0}}
	}
	adm := func(session, id string, seq uint64, mod func(a *backend.Admission)) backend.Record {
		a := &backend.Admission{ID: admID(id), Session: session, Seq: seq, Kind: backend.KindAutomation, Producer: Producer,
			Principal: Owner, Identities: []string{"i-" + id}, Payload: Payload(id), PinnedTarget: session,
			Status: backend.StatusQueued, AdmittedAt: T0}
		mod(a)
		return backend.Record{Admission: a}
	}
	same := func(*backend.Admission) {}

	err := importErr(t, s, []backend.Record{session("g"), transcript("g"),
		{Message: &backend.Message{Transcript: "g", Seq: 2, Role: backend.RoleNote, Content: "after a gap", CreatedAt: T0}}})
	wantErr(t, "import a message after a gap", err, backend.ErrInvalid)

	noErr(t, "import a session", importErr(t, s, []backend.Record{session("s1"), transcript("s1"),
		adm("s1", "a1", 1, func(a *backend.Admission) { a.Identities = []string{"shared"} }),
		adm("s1", "h1", 2, func(a *backend.Admission) {
			a.Kind, a.Producer, a.Identities, a.RequestID, a.PinnedTarget = backend.KindHuman, "", nil, "rq", ""
		}),
	}))
	for what, r := range map[string]backend.Record{
		"an identity held by another admission": adm("s1", "a2", 3, func(a *backend.Admission) { a.Identities = []string{"shared"} }),
		"a request id held by another admission": adm("s1", "h2", 4, func(a *backend.Admission) {
			a.Kind, a.Producer, a.Identities, a.RequestID, a.PinnedTarget = backend.KindHuman, "", nil, "rq", ""
		}),
		"a seq held by another admission": adm("s1", "a3", 1, same),
	} {
		wantErr(t, "import "+what, importErr(t, s, []backend.Record{r}), backend.ErrConflict)
	}
	if a, err := s.FindIdentity(ctxOf(t), "s1", "shared"); err != nil || a.ID != admID("a1") {
		t.Errorf("identity shared after refused imports: %+v, %v; want admission a1", a, err)
	}
	res := admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("h1")})
	noErr(t, "request id after refused imports", res.Err)
	if res.Result != backend.ResultDuplicate || res.Admission.ID != admID("h1") {
		t.Errorf("request id rq after refused imports: %s %s, want a duplicate of h1", res.Result, res.Admission.ID)
	}
}

// admID turns a short test name into an admission id by the live rules (32
// lower-case hex digits).
func admID(name string) string {
	h := hex.EncodeToString([]byte(name))
	return strings.Repeat("0", 32-len(h)) + h
}
