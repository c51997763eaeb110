package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var compactTests = []suiteTest{
	{name: "CompactKeepsResolving", fn: testCompactKeepsResolving},
	{name: "CompactExportImport", fresh: testCompactExportImport},
	{name: "Reclaim", fn: testReclaim},
}

// compactFixture: in s1, a human turn with a request id (settled at +2s),
// a note with two identities (+3s), a queued human input, a cancelled
// automation input (+1s), and one settled later (+1h).
func compactFixture(t *testing.T, s backend.Store) (turn, note, queued, cancelled, late backend.Admission) {
	t.Helper()
	openSession(t, s, "s1")
	h := admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("question")})
	noErr(t, "admit", h.Err)
	n := auto(t, s, "s1", "note text", "n1", "n2").Admission
	c := auto(t, s, "s1", "cancelled", "c1").Admission
	_, err := s.Cancel(ctxOf(t), c.ID, at(time.Second))
	noErr(t, "cancel", err)
	l := acquire(t, s, "s1", "A", T0)
	turn = settleTurn(t, s, claim(t, s, l, h.Admission.ID, at(time.Second)), "reply", at(2*time.Second))
	note, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: n.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", n)}, Now: at(3 * time.Second)})
	noErr(t, "note", err)
	lt := auto(t, s, "s1", "late", "l1").Admission
	late, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: lt.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", lt)}, Now: at(time.Hour)})
	noErr(t, "late note", err)
	queued = human(t, s, "s1", "still queued")
	cancelled, err = s.GetAdmission(ctxOf(t), c.ID)
	noErr(t, "get cancelled", err)
	return turn, note, queued, cancelled, late
}

// Compact turns done admissions settled before the cut into tombstones,
// atomically: they leave listings, keep resolving their identities, request
// ids and ids as duplicates (payload compared by digest), and nothing else
// changes; compacting again finds nothing.
func testCompactKeepsResolving(t *testing.T, s backend.Store) {
	turn, note, queued, cancelled, late := compactFixture(t, s)
	msgs := listMessages(t, s, "s1")

	// Limit bounds one call; seq order.
	res, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute), Limit: 1})
	noErr(t, "compact limit 1", err)
	diff(t, "compacted with limit 1", []string{turn.ID}, res.Compacted)
	res, err = s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact", err)
	diff(t, "compacted", []string{note.ID, cancelled.ID}, res.Compacted)
	res, err = s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact again", err)
	if len(res.Compacted) != 0 {
		t.Errorf("compacting again: %v, want nothing", res.Compacted)
	}
	_, err = s.Compact(ctxOf(t), backend.CompactRequest{Session: "nosuch", Before: at(time.Minute)})
	wantErr(t, "compact an unknown session", err, backend.ErrNotFound)

	var ids []string
	for _, a := range listAdmissions(t, s, "s1", backend.AdmissionFilter{}) {
		ids = append(ids, a.ID)
	}
	diff(t, "listed after compaction", []string{late.ID, queued.ID}, ids)
	diff(t, "messages after compaction", msgs, listMessages(t, s, "s1"))
	if sess := getSession(t, s, "s1"); sess.Queued != 1 {
		t.Errorf("depth %d after compaction, want 1", sess.Queued)
	}

	// A tombstone: every field but the payload.
	tomb := getAdmission(t, s, note.ID)
	want := note
	want.Payload, want.Compacted, want.PayloadSHA1 = nil, true, backend.PayloadDigest(note.Payload)
	diff(t, "tombstone", want, tomb)
	if got, err := s.FindIdentity(ctxOf(t), "s1", "n2"); err != nil || got.ID != note.ID || !got.Compacted {
		t.Errorf("find n2 after compaction: %+v, %v", got, err)
	}

	// Re-offers resolve to the tombstones as duplicates: nothing new.
	r := admit1(t, s, autoReq("s1", "note text", "n1"))
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != note.ID || !r.Admission.Compacted || r.PayloadDiffers {
		t.Errorf("re-offer n1: %+v", r)
	}
	r = admit1(t, s, autoReq("s1", "other text", "n2"))
	if r.Err != nil || r.Result != backend.ResultDuplicate || !r.PayloadDiffers {
		t.Errorf("re-offer n2 with another payload: %+v, want duplicate with payload_differs", r)
	}
	r = admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("question")})
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != turn.ID {
		t.Errorf("re-sent request id: %+v", r)
	}
	r = admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("another")})
	wantErr(t, "request id reused with another payload after compaction", r.Err, backend.ErrConflict)
	r = admit1(t, s, backend.AdmitRequest{ID: cancelled.ID, Session: "s1", Kind: backend.KindAutomation, Producer: Producer,
		Principal: Owner, Identities: []string{"c1"}, Payload: Payload("cancelled")})
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != cancelled.ID {
		t.Errorf("re-sent admission id: %+v", r)
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 2 {
		t.Errorf("%d admissions listed after the re-offers, want 2", n)
	}
	if sess := getSession(t, s, "s1"); sess.NextSeq != late.Seq+2 {
		t.Errorf("next seq %d: a re-offer created an admission", sess.NextSeq)
	}
	// A tombstone is done: it cannot be cancelled or resolved.
	_, err = s.Cancel(ctxOf(t), note.ID, at(2*time.Hour))
	wantErr(t, "cancel a tombstone", err, backend.ErrConflict)
}

// Export writes tombstones as tombstone records; an import into a fresh
// store keeps them resolving, and importing them again is a no-op.
func testCompactExportImport(t *testing.T, newStore func(t *testing.T) backend.Store) {
	s := newStore(t)
	_, note, _, _, _ := compactFixture(t, s)
	_, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact", err)
	recs := export(t, s)
	var tombs []string
	for _, r := range recs {
		if r.Tombstone != nil {
			tombs = append(tombs, r.Tombstone.Admission.ID)
			if r.Tombstone.PayloadDigest == "" || r.Tombstone.Admission.Payload != nil {
				t.Errorf("tombstone record %+v", r.Tombstone)
			}
		}
	}
	if len(tombs) != 3 || !slices.Contains(tombs, note.ID) {
		t.Fatalf("exported tombstones %v, want 3 with %s", tombs, note.ID)
	}
	fresh := newStore(t)
	noErr(t, "import", fresh.Import(ctxOf(t), recs))
	noErr(t, "import again", fresh.Import(ctxOf(t), recs))
	diff(t, "export of the imported store", recs, export(t, fresh))
	r := admit1(t, fresh, autoReq("s1", "note text", "n2"))
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != note.ID || r.PayloadDiffers {
		t.Errorf("re-offer after import: %+v", r)
	}
	var bad backend.Tombstone
	for _, r := range recs {
		if r.Tombstone != nil {
			bad = *r.Tombstone
		}
	}
	bad.PayloadDigest = "not hex"
	other := newStore(t)
	err = other.Import(ctxOf(t), []backend.Record{recs[0], {Tombstone: &bad}})
	wantErr(t, "import a tombstone with a bad digest", err, backend.ErrInvalid)
}

// Reclaim reports sizes and changes no record.
func testReclaim(t *testing.T, s backend.Store) {
	compactFixture(t, s)
	_, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact", err)
	before := export(t, s)
	res, err := s.Reclaim(ctxOf(t))
	noErr(t, "reclaim", err)
	if res.Before <= 0 || res.After <= 0 {
		t.Errorf("reclaim sizes %+v, want both positive", res)
	}
	diff(t, "export after reclaim", before, export(t, s))
	if size, err := s.Size(ctxOf(t)); err != nil || size <= 0 {
		t.Errorf("size after reclaim: %d, %v", size, err)
	}
	human(t, s, "s1", "after reclaim")
}
