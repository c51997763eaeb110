package backendtest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// importTests: an import is checked whole, against the store too, before
// anything of it is written.
var importTests = []suiteTest{
	{name: "Import/LineageLoops", fn: testImportLineageLoops},
	{name: "Import/ConflictWritesNothing", fresh: testImportConflictWritesNothing},
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
