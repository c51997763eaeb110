package admissiontest

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// 1a. Human FIRST, then two completions with no viewer: both stay queued
// (busy is a pause, never a refusal) and nothing is noted at admission;
// the drain runs FIRST as a turn that saw no note, then notes both.
func busyFIFO(t *testing.T, h *harness) {
	first := h.human("s1", "FIRST")
	ra := h.offer("s1", "process", []string{ident("completion", "proc_a", "1700000000.0")}, "[finished] RESULT_proc_a", "")
	rb := h.offer("s1", "process", []string{ident("completion", "proc_busy", "1700000000.0")}, "[finished] RESULT_proc_busy", "")
	for _, r := range []backend.AdmitResult{ra, rb} {
		if r.Result != backend.ResultAdmitted {
			t.Errorf("offer: result %q, want admitted", r.Result)
		}
	}
	auto := h.admissions("s1", backend.AdmissionFilter{})
	if len(auto) != 3 {
		t.Fatalf("%d admissions, want 3", len(auto))
	}
	for _, a := range auto {
		if a.Status != backend.StatusQueued {
			t.Errorf("admission %q: status %s before the drain, want queued", a.Text(), a.Status)
		}
	}
	if n := h.notes("s1"); len(n) != 0 {
		t.Errorf("notes before the drain: %q, want none", n)
	}

	rep := h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"FIRST/0"})
	h.wantStrings("transcript s1", h.roles("s1"), []string{
		"user:FIRST", "assistant:reply to FIRST notes_seen=0",
		"note:[finished] RESULT_proc_a", "note:[finished] RESULT_proc_busy",
	})
	if rep.Turns != 1 || rep.Notes != 2 || rep.Failed != 0 || len(rep.Executed) != 3 {
		t.Errorf("report: %d turns, %d notes, %d failed, %d executed; want 1, 2, 0, 3", rep.Turns, rep.Notes, rep.Failed, len(rep.Executed))
	}
	h.wantState(first.Admission.ID, "done/completed/turn")
	for _, r := range []backend.AdmitResult{ra, rb} {
		a := h.wantState(r.Admission.ID, "done/completed/note")
		if a.DeliveredTo != "s1" {
			t.Errorf("admission %s delivered to %q, want s1", a.ID, a.DeliveredTo)
		}
		if n := h.notesOf("s1", a.ID); n != 1 {
			t.Errorf("admission %s: %d notes carry its id, want 1", a.ID, n)
		}
	}
	for _, m := range h.messages("s1") {
		if m.Role != backend.RoleNote {
			continue
		}
		a := h.admission(metaString(m, "admission_id"))
		ids, _ := m.Metadata["identities"].([]any)
		if metaString(m, "producer") != "process" || len(ids) != 1 || ids[0] != a.Identities[0] || m.AdmissionID != a.ID {
			t.Errorf("note %q: admission %q, metadata %v; want its admission's id, producer and identities", m.Content, m.AdmissionID, m.Metadata)
		}
	}
	// The handler got the contract's environment.
	if in := h.turns(); len(in) == 1 {
		env := in[0].Env
		if env["HERMESQ_ADMISSION"] != first.Admission.ID || env["HERMESQ_SESSION"] != "s1" ||
			env["HERMESQ_TARGET"] != "s1" || env["HERMESQ_KIND"] != "human" || env["HERMESQ_EPOCH"] != itoa(int(rep.Epoch)) {
			t.Errorf("handler environment %v", env)
		}
		if in[0].Admission != first.Admission.ID || in[0].Target != "s1" || in[0].MessageCount != 0 {
			t.Errorf("turn input %+v", in[0])
		}
	}
}

// 1b. A completion, then human AFTER: the turn sees the note written before it.
func laterInputSeesNote(t *testing.T, h *harness) {
	h.openSession("s1")
	c := h.offer("s1", "process", []string{process.id("proc_early")}, process.text("proc_early"), "")
	h.human("s1", "AFTER")
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"AFTER/1"})
	h.wantStrings("notes", h.notes("s1"), []string{process.text("proc_early")})
	h.wantStrings("transcript s1", h.roles("s1"), []string{
		"note:" + process.text("proc_early"), "user:AFTER", "assistant:reply to AFTER notes_seen=1",
	})
	h.wantState(c.Admission.ID, "done/completed/note")
}

// 1c. A viewer who attaches after the completion was admitted but before it
// runs gets the turn, and no note is written.
func viewerAttachesAfterAdmission(t *testing.T, h *harness) {
	h.openSession("s1")
	c := h.offer("s1", "process", []string{process.id("proc_viewer")}, process.text("proc_viewer"), "")
	if _, err := h.svc.AddViewer(h.ctx, "s1", 0); err != nil {
		t.Fatal(err)
	}
	rep := h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{process.text("proc_viewer") + "/0"})
	h.wantState(c.Admission.ID, "done/completed/turn")
	h.wantStrings("transcript s1", h.roles("s1"), []string{
		"user:" + process.text("proc_viewer"), "assistant:reply to " + process.text("proc_viewer") + " notes_seen=0",
	})
	for _, m := range h.messages("s1") {
		if _, ok := m.Metadata["producer"]; ok || m.Role == backend.RoleNote {
			t.Errorf("message %+v looks like a note", m)
		}
	}
	if rep.Turns != 1 || rep.Notes != 0 {
		t.Errorf("report: %d turns, %d notes; want 1, 0", rep.Turns, rep.Notes)
	}
	if in := h.turns(); len(in) == 1 && (in[0].Env["HERMESQ_KIND"] != "automation" || in[0].Env["HERMESQ_PRODUCER"] != "process") {
		t.Errorf("handler environment %v, want kind automation, producer process", in[0].Env)
	}
}

// 1d. Watch notices with no viewer are notes, in order, and no turn.
func watchNotices(t *testing.T, h *harness) {
	h.openSession("s1")
	for _, kind := range []string{"watch_match", "watch_disabled"} {
		r := h.offer("s1", "watch", []string{ident(kind, "proc_watch", "evt-1")}, "[watch] RESULT_"+kind, "")
		if r.Result != backend.ResultAdmitted {
			t.Errorf("offer %s: %q", kind, r.Result)
		}
	}
	rep := h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), nil)
	h.wantStrings("notes", h.notes("s1"), []string{"[watch] RESULT_watch_match", "[watch] RESULT_watch_disabled"})
	if rep.Turns != 0 || rep.Notes != 2 {
		t.Errorf("report: %d turns, %d notes; want 0, 2", rep.Turns, rep.Notes)
	}
}

// 1e. Lost acknowledgement and regrouped re-offer: [A] is noted; after a new
// epoch, [A, B] resolves A to its admission and admits B alone; each is
// noted exactly once. [C, D] is one coalesced admission that [D] finds.
func regroup(t *testing.T, h *harness) {
	d := producers[1]
	A, B, C, D := d.id("deleg_alpha"), d.id("deleg_bravo"), d.id("deleg_charlie"), d.id("deleg_delta")
	h.openSession("s1")
	ra := h.offer("s1", "delegation", []string{A}, d.text("deleg_alpha"), "")
	if ra.Result != backend.ResultAdmitted {
		t.Fatalf("[A]: %q", ra.Result)
	}
	if rep := h.drain("s1"); rep.Notes != 1 {
		t.Fatalf("first drain: %d notes, want 1", rep.Notes)
	}
	// The acknowledgement was lost; the producer offers A again, grouped
	// with a fresh B, to a new drainer epoch.
	rab := h.offer("s1", "delegation", []string{A, B}, d.text("deleg_alpha")+"\n"+d.text("deleg_bravo"), "")
	if rab.Result != backend.ResultAdmitted {
		t.Errorf("[A,B]: result %q, want admitted (B alone)", rab.Result)
	}
	if rab.Identities[A] != backend.ResultDuplicate || rab.Identities[B] != backend.ResultAdmitted {
		t.Errorf("[A,B]: identities %v, want A duplicate, B admitted", rab.Identities)
	}
	if rab.Admission.ID == ra.Admission.ID || !eq(rab.Admission.Identities, []string{B}) {
		t.Errorf("[A,B]: new admission %s with identities %q, want a new one with [B]", rab.Admission.ID, rab.Admission.Identities)
	}
	if !eq(rab.Duplicates, []string{ra.Admission.ID}) {
		t.Errorf("[A,B]: duplicates %q, want [%s]", rab.Duplicates, ra.Admission.ID)
	}
	if rep := h.drain("s1"); rep.Notes != 1 {
		t.Errorf("second drain: %d notes, want 1", rep.Notes)
	}
	if n := h.notesOf("s1", ra.Admission.ID); n != 1 {
		t.Errorf("A: %d notes, want 1", n)
	}
	if n := h.notesOf("s1", rab.Admission.ID); n != 1 {
		t.Errorf("B: %d notes, want 1", n)
	}
	if n := len(h.notes("s1")); n != 2 {
		t.Errorf("%d notes in all, want 2", n)
	}
	var outcomes []string
	for _, a := range h.admissions("s1", backend.AdmissionFilter{}) {
		outcomes = append(outcomes, string(a.Outcome))
	}
	h.wantStrings("outcomes", outcomes, []string{"completed", "completed"})
	h.wantStrings("turns", h.turnTexts(), nil)

	rcd := h.offer("s1", "delegation", []string{C, D}, d.text("deleg_charlie")+"\n"+d.text("deleg_delta"), "")
	if rcd.Result != backend.ResultCoalesced || !eq(rcd.Admission.Identities, []string{C, D}) {
		t.Errorf("[C,D]: result %q identities %q, want coalesced [C D]", rcd.Result, rcd.Admission.Identities)
	}
	rd := h.offer("s1", "delegation", []string{D}, d.text("deleg_delta"), "")
	if rd.Result != backend.ResultDuplicate || rd.Admission.ID != rcd.Admission.ID {
		t.Errorf("[D]: result %q admission %s, want duplicate of %s", rd.Result, rd.Admission.ID, rcd.Admission.ID)
	}
	if !rd.PayloadDiffers {
		t.Errorf("[D]: payload_differs false, want true (first committed payload wins)")
	}
	if got := textOf(h.admission(rcd.Admission.ID)); got != d.text("deleg_charlie")+"\n"+d.text("deleg_delta") {
		t.Errorf("[C,D] payload text %q changed by the re-offer", got)
	}
	if n := len(h.admissions("s1", backend.AdmissionFilter{})); n != 3 {
		t.Errorf("%d admissions, want 3", n)
	}
}

// Regrouped re-offer with a part per member: [A] is noted; [A, B] then
// comes with A's and B's results as their own parts. A resolves to its
// admission, B's admission holds B's part alone, and after the drain each
// result stands in exactly one note.
func regroupWithParts(t *testing.T, h *harness) {
	d := producers[1]
	A, B := d.id("deleg_alpha"), d.id("deleg_bravo")
	h.openSession("s1")
	ra := h.offerParts("s1", "delegation", []string{A}, []string{"RESULT_alpha"})
	if rep := h.drain("s1"); rep.Notes != 1 {
		t.Fatalf("first drain: %d notes, want 1", rep.Notes)
	}
	rab := h.offerParts("s1", "delegation", []string{A, B}, []string{"RESULT_alpha", "RESULT_bravo"})
	if rab.Result != backend.ResultAdmitted || rab.Identities[A] != backend.ResultDuplicate || rab.Identities[B] != backend.ResultAdmitted {
		t.Fatalf("[A,B]: result %q identities %v, want admitted with A duplicate, B admitted", rab.Result, rab.Identities)
	}
	if got := textOf(h.admission(rab.Admission.ID)); got != "RESULT_bravo" {
		t.Errorf("B's admission text %q, want B's part alone", got)
	}
	if rab.PayloadDiffers {
		t.Errorf("[A,B]: payload_differs true, but A's part is the committed one")
	}
	h.drain("s1")
	h.wantStrings("notes", h.notes("s1"), []string{"RESULT_alpha", "RESULT_bravo"})
	for _, want := range []string{"RESULT_alpha", "RESULT_bravo"} {
		n := 0
		for _, note := range h.notes("s1") {
			n += strings.Count(note, want)
		}
		if n != 1 {
			t.Errorf("%s appears %d times in the notes, want once", want, n)
		}
	}
	if n := h.notesOf("s1", ra.Admission.ID) + h.notesOf("s1", rab.Admission.ID); n != 2 {
		t.Errorf("%d notes of A and B, want 2", n)
	}
	h.wantStrings("turns", h.turnTexts(), nil)
}

// The same with a viewer watching when B runs: A's note stays the only
// one, and B is a turn whose input is B's part alone.
func regroupWithPartsViewer(t *testing.T, h *harness) {
	d := producers[1]
	A, B := d.id("deleg_alpha"), d.id("deleg_bravo")
	h.openSession("s1")
	h.offerParts("s1", "delegation", []string{A}, []string{"RESULT_alpha"})
	h.drain("s1")
	h.offerParts("s1", "delegation", []string{A, B}, []string{"RESULT_alpha", "RESULT_bravo"})
	if _, err := h.svc.AddViewer(h.ctx, "s1", 0); err != nil {
		t.Fatal(err)
	}
	rep := h.drain("s1")
	if rep.Turns != 1 || rep.Notes != 0 {
		t.Errorf("second drain: %d turns, %d notes; want 1, 0", rep.Turns, rep.Notes)
	}
	h.wantStrings("notes", h.notes("s1"), []string{"RESULT_alpha"})
	h.wantStrings("turns", h.turnTexts(), []string{"RESULT_bravo/1"})
}

// 1f. A note grows the transcript by exactly one message, a turn by two.
func messageCounts(t *testing.T, h *harness) {
	h.openSession("s1")
	before := h.transcript("s1").MessageCount
	h.offer("s1", "process", []string{process.id("proc_count")}, process.text("proc_count"), "")
	h.drain("s1")
	afterNote := h.transcript("s1")
	if afterNote.MessageCount != before+1 || afterNote.NoteCount != 1 {
		t.Errorf("after a note: %d messages (%d notes), want %d (1)", afterNote.MessageCount, afterNote.NoteCount, before+1)
	}
	h.human("s1", "HELLO")
	h.drain("s1")
	if got := h.transcript("s1").MessageCount; got != afterNote.MessageCount+2 {
		t.Errorf("after a turn: %d messages, want %d", got, afterNote.MessageCount+2)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"HELLO/1"})
}

// 2. (principal, request id) idempotency: same payload → duplicate (a
// success), another payload → conflict and nothing changed.
func requestIDIdempotency(t *testing.T, h *harness) {
	in := admission.Input{Session: "s1", Text: "hello", RequestID: "r1", Principal: owner}
	r1, err := h.svc.Admit(h.ctx, in)
	if err != nil || r1.Result != backend.ResultAdmitted {
		t.Fatalf("first: %q %v", r1.Result, err)
	}
	r2, err := h.svc.Admit(h.ctx, in)
	if err != nil || r2.Result != backend.ResultDuplicate || r2.Admission.ID != r1.Admission.ID {
		t.Errorf("repeat: %q %s %v, want duplicate of %s", r2.Result, r2.Admission.ID, err, r1.Admission.ID)
	}
	// The same object spelled differently is the same canonical payload.
	spelled := in
	spelled.Text, spelled.Payload = "", []byte(` { "text" : "hello" } `)
	if r, err := h.svc.Admit(h.ctx, spelled); err != nil || r.Result != backend.ResultDuplicate {
		t.Errorf("same payload spelled differently: %q %v, want duplicate", r.Result, err)
	}
	before := h.session("s1")
	other := in
	other.Text = "other"
	r3, err := h.svc.Admit(h.ctx, other)
	if !errors.Is(err, backend.ErrConflict) || !errors.Is(r3.Err, backend.ErrConflict) {
		t.Errorf("same request id, other payload: %v, want conflict", err)
	}
	after := h.session("s1")
	all := h.admissions("s1", backend.AdmissionFilter{})
	if len(all) != 1 || string(all[0].Payload) != `{"text":"hello"}` || after.NextSeq != before.NextSeq || after.Queued != 1 {
		t.Errorf("after the conflict: %d admissions (payload %s), next seq %d→%d, queued %d; want 1 unchanged",
			len(all), all[0].Payload, before.NextSeq, after.NextSeq, after.Queued)
	}
	// Without a request id every input is new.
	n1 := h.human("s1", "again")
	n2 := h.human("s1", "again")
	if n1.Admission.ID == n2.Admission.ID {
		t.Errorf("two inputs without request id share admission %s", n1.Admission.ID)
	}
	// Another principal's request id is another key.
	if err := h.store.Grant(h.ctx, "s1", backend.Grant{Principal: "bob", Role: backend.RoleWriter}); err != nil {
		t.Fatal(err)
	}
	bob := in
	bob.Principal = "bob"
	if r, err := h.svc.Admit(h.ctx, bob); err != nil || r.Result != backend.ResultAdmitted || r.Admission.ID == r1.Admission.ID {
		t.Errorf("bob's r1: %q %v, want a new admission", r.Result, err)
	}
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"hello/0", "again/0", "again/0", "hello/0"})
	// Done, the key still resolves: no second turn.
	if r, err := h.svc.Admit(h.ctx, in); err != nil || r.Result != backend.ResultDuplicate || r.Admission.Status != backend.StatusDone {
		t.Errorf("after the turn: %q %s %v, want duplicate of the done admission", r.Result, r.Admission.Status, err)
	}
	if rep := h.drain("s1"); len(rep.Executed) != 0 {
		t.Errorf("drain after the duplicate executed %d admissions", len(rep.Executed))
	}
	if n := len(h.turns()); n != 4 {
		t.Errorf("%d turns, want 4", n)
	}
}
