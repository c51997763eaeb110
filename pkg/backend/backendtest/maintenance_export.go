package backendtest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var maintenanceExportTests = []suiteTest{
	{name: "ExportImport", fresh: testExportImport},
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/ExportGrantsNeverNull", fn: testExportGrantsNeverNull},
	{name: "Edges/ExportOrder", fn: testExportOrder},
}

// populate fills a store with every kind of record and status.
func populate(t *testing.T, s backend.Store) {
	t.Helper()
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	noErr(t, "grant", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleWriter, Producers: []string{Producer, "watch"}}))
	h := admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("with <html> & \"quotes\"")})
	noErr(t, "admit", h.Err)
	n := auto(t, s, "s1", "note text", "n1", "n2").Admission
	u := human(t, s, "s1", "becomes unknown")
	human(t, s, "s1", "stays queued")
	c := auto(t, s, "s1", "cancelled", "c1").Admission
	_, err := s.Cancel(ctxOf(t), c.ID, at(time.Second))
	noErr(t, "cancel", err)

	l := acquire(t, s, "s1", "A", T0)
	settleTurn(t, s, claim(t, s, l, h.Admission.ID, at(time.Second)), "reply", at(2*time.Second))
	_, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: n.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", n)}, Now: at(3 * time.Second)})
	noErr(t, "note", err)
	_, err = s.Compress(ctxOf(t), "s1", "s1.2", at(4*time.Second))
	noErr(t, "compress", err)
	claim(t, s, l, u.ID, at(5*time.Second))
	acquire(t, s, "s1", "B", at(time.Hour)) // u becomes unknown

	x := human(t, s, "s2", "closed later")
	l2 := acquire(t, s, "s2", "A", T0)
	settleTurn(t, s, claim(t, s, l2, x.ID, T0), "done", T0)
	noErr(t, "release", s.ReleaseLease(ctxOf(t), backend.LeaseRequest{Session: "s2", Holder: "A", Epoch: l2.Epoch}))
	_, err = s.CloseSession(ctxOf(t), "s2", "branched", at(time.Minute))
	noErr(t, "close", err)
	_, err = s.Switch(ctxOf(t), "s2", "s2-other", at(2*time.Minute))
	noErr(t, "switch", err)
	openSession(t, s, "s3")
}

func export(t *testing.T, s backend.Store) []backend.Record {
	t.Helper()
	var recs []backend.Record
	noErr(t, "export", s.Export(ctxOf(t), func(r backend.Record) error {
		recs = append(recs, r)
		return nil
	}))
	return recs
}

func testExportImport(t *testing.T, newStore func(t *testing.T) backend.Store) {
	s := newStore(t)
	populate(t, s)
	recs := export(t, s)
	var sessions, transcripts, messages, admissions int
	for _, r := range recs {
		switch {
		case r.Session != nil:
			sessions++
		case r.Transcript != nil:
			transcripts++
		case r.Message != nil:
			messages++
		case r.Admission != nil:
			admissions++
		}
	}
	if sessions != 3 || transcripts != 5 || messages != 5 || admissions != 6 {
		t.Fatalf("export: %d sessions %d transcripts %d messages %d admissions, want 3 5 5 6", sessions, transcripts, messages, admissions)
	}
	if recs[0].Session == nil || recs[0].Session.ID != "s1" {
		t.Fatalf("export does not start with session s1: %+v", recs[0])
	}

	// Importing what a store holds is a no-op; into a second fresh store
	// it reproduces every record.
	noErr(t, "re-import into the source", importErr(t, s, recs))
	diff(t, "export after re-import", recs, export(t, s))

	fresh := newStore(t)
	noErr(t, "import into a fresh store", importErr(t, fresh, recs))
	diff(t, "export of the imported store", recs, export(t, fresh))
	noErr(t, "import again", importErr(t, fresh, recs))
	diff(t, "export after importing twice", recs, export(t, fresh))

	for _, id := range []string{"s1", "s2", "s3"} {
		want, got := getSession(t, s, id), getSession(t, fresh, id)
		want.LeaseHolder, want.LeaseExpiresAt = "", time.Time{} // leases are not exported
		got.LeaseHolder, got.LeaseExpiresAt = "", time.Time{}
		diff(t, "imported session "+id, want, got)
	}
	// The indexes work in the imported store.
	res := admit1(t, fresh, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("with <html> & \"quotes\"")})
	noErr(t, "request id in the imported store", res.Err)
	if res.Result != backend.ResultDuplicate {
		t.Errorf("request id in the imported store: %q, want duplicate", res.Result)
	}
	if r := auto(t, fresh, "s1", "note text", "n2"); r.Result != backend.ResultDuplicate {
		t.Errorf("identity in the imported store: %q, want duplicate", r.Result)
	}
	if _, err := fresh.FindIdentity(ctxOf(t), "", "c1"); err != nil {
		t.Errorf("find identity in the imported store: %v", err)
	}
	if a := human(t, fresh, "s1", "new"); a.Seq <= getSession(t, s, "s1").NextSeq-1 {
		t.Errorf("new admission in the imported store reuses seq %d", a.Seq)
	}
	tr := getTranscript(t, fresh, "s1")
	if tr.MessageCount != 3 || tr.NoteCount != 1 || tr.Child != "s1.2" {
		t.Errorf("imported transcript: %+v", tr)
	}

	// A record present with other content conflicts.
	changed := *recs[0].Session
	changed.Owner = "someone-else"
	err := importErr(t, fresh, []backend.Record{{Session: &changed}})
	wantErr(t, "import a changed session", err, backend.ErrConflict)
}

// An exported session lists its grants as a JSON array, [] for none, as an
// admission's identities: one form whatever the store.
func testExportGrantsNeverNull(t *testing.T, s backend.Store) {
	openSession(t, s, "a")
	openSession(t, s, "b")
	noErr(t, "grant", s.Grant(ctxOf(t), "b", backend.Grant{Principal: Other, Role: backend.RoleReader}))
	want := map[string]string{"a": `"grants":[]`, "b": `"grants":[{"principal":"` + Other + `","role":"reader"}]`}
	for _, r := range export(t, s) {
		if r.Session == nil {
			continue
		}
		b, err := json.Marshal(r)
		noErr(t, "marshal session record", err)
		if !strings.Contains(string(b), want[r.Session.ID]) {
			t.Errorf("exported session %s: %s, want %s", r.Session.ID, b, want[r.Session.ID])
		}
		delete(want, r.Session.ID)
	}
	if len(want) != 0 {
		t.Errorf("sessions not exported: %v", want)
	}
}

// Export writes, for each session by id, the session, then its transcripts
// by id, each followed by its messages in seq order, then its admissions by
// seq: one order whatever the store, so two exports compare line by line.
func testExportOrder(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	_, err := s.Switch(ctxOf(t), "s1", "a-branch", at(time.Minute))
	noErr(t, "switch", err)
	_, err = s.Compress(ctxOf(t), "s1", "0-child", at(2*time.Minute))
	noErr(t, "compress", err)
	openSession(t, s, "r0")
	var got []string
	for _, r := range export(t, s) {
		switch {
		case r.Session != nil:
			got = append(got, "session "+r.Session.ID)
		case r.Transcript != nil:
			got = append(got, "transcript "+r.Transcript.ID)
		}
	}
	want := []string{"session r0", "transcript r0", "session s1", "transcript 0-child", "transcript a-branch", "transcript s1"}
	diff(t, "export order", want, got)
}
