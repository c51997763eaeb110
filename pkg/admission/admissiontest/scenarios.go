package admissiontest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
)

// scenario is one named scenario, run on a fresh harness.
type scenario struct {
	name string
	fn   func(t *testing.T, h *harness)
}

// RunScenarios runs the contract's scenarios through an admission.Service
// on stores made by newStore, which must return a fresh, empty store for
// each call (closed by the caller's t.Cleanup).
func RunScenarios(t *testing.T, newStore func(t *testing.T) backend.Store) {
	scenarios := []scenario{
		{"BusyFIFO", busyFIFO},
		{"LaterInputSeesNote", laterInputSeesNote},
		{"ViewerAttachesAfterAdmission", viewerAttachesAfterAdmission},
		{"WatchNotices", watchNotices},
		{"Regroup", regroup},
		{"RegroupWithParts", regroupWithParts},
		{"RegroupWithPartsViewer", regroupWithPartsViewer},
		{"MessageCounts", messageCounts},
		{"RequestIDIdempotency", requestIDIdempotency},
		{"QueuedWorkSurvivesNewDrainer", queuedWorkSurvivesNewDrainer},
		{"ExecutedTurnStaysATurn", executedTurnStaysATurn},
		{"FencingRace", fencingRace},
		{"UnknownPausesByDefault", unknownPausesByDefault},
		{"UnknownRequeuePolicy", unknownRequeuePolicy},
		{"UnknownInterruptPolicy", unknownInterruptPolicy},
		{"Max", maxBound},
		{"NoHandler", noHandler},
		{"HandlerFails", handlerFails},
		{"HandlerTimeout", handlerTimeout},
		{"GraceLetsTheTurnFinish", graceLetsTheTurnFinish},
		{"GraceExpiredInterrupts", graceExpiredInterrupts},
		{"LeaseRenewed", leaseRenewed},
		{"LeaseHeld", leaseHeld},
		{"Follow", follow},
		{"DrainAll", drainAll},
		{"DrainAllFollow", drainAllFollow},
		{"HumanToClosedSession", humanToClosedSession},
		{"HumanQueuedThenSwitchedToClosed", humanQueuedThenSwitchedToClosed},
		{"LineageAndResolveTarget", lineageAndResolveTarget},
	}
	scenarios = append(scenarios, faultScenarios...)
	scenarios = append(scenarios, backToBackScenarios...)
	scenarios = append(scenarios, dataScenarios...)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.fn(t, newHarness(t, newStore)) })
	}
	runMoved(t, newStore)
	for _, p := range producers {
		for _, reason := range backend.CloseReasons {
			t.Run("ClosedSessionNote/"+p.name+"/"+reason, func(t *testing.T) {
				closedSessionNote(t, newHarness(t, newStore), p, reason)
			})
			t.Run("CompressedThenClosed/"+p.name+"/"+reason, func(t *testing.T) {
				compressedThenClosed(t, newHarness(t, newStore), p, reason)
			})
		}
		t.Run("Misrouted/"+p.name, func(t *testing.T) { misrouted(t, newHarness(t, newStore), p) })
		t.Run("TransientTargetRead/"+p.name, func(t *testing.T) {
			transientTargetRead(t, newStore, p)
		})
	}
}

// producer is how one producer names and words a completion.
type producer struct {
	name string // producer name on the admission
	id   func(name string) string
	text func(name string) string
}

var producers = []producer{
	{
		name: "process",
		id:   func(n string) string { return ident("completion", n, "1700000000.0") },
		text: func(n string) string { return "[finished] RESULT_" + n },
	},
	{
		name: "delegation",
		id:   func(n string) string { return ident("async_delegation", n, "") },
		text: func(n string) string { return "[delegation] RESULT_" + n },
	},
}

var process = producers[0]

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

// Issue 3: queued work survives a new drainer (a new epoch) untouched.
func queuedWorkSurvivesNewDrainer(t *testing.T, h *harness) {
	h.human("s1", "FIRST")
	h.offer("s1", "process", []string{process.id("proc_restart")}, process.text("proc_restart"), "")
	before := h.admissions("s1", backend.AdmissionFilter{})
	// A drainer starts (new epoch) and dies before taking anything.
	l, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: "s1", Holder: "died", TTL: time.Second, Now: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Recovered) != 0 {
		t.Errorf("new epoch recovered %q, want nothing", l.Recovered)
	}
	after := h.admissions("s1", backend.AdmissionFilter{})
	if len(after) != len(before) {
		t.Fatalf("%d admissions after the new epoch, want %d", len(after), len(before))
	}
	for i := range before {
		if state(after[i]) != state(before[i]) || after[i].Epoch != before[i].Epoch || after[i].Seq != before[i].Seq {
			t.Errorf("admission %s changed by a new epoch: %s epoch %d → %s epoch %d",
				before[i].ID, state(before[i]), before[i].Epoch, state(after[i]), after[i].Epoch)
		}
	}
	rep := h.drain("s1")
	if rep.Epoch <= l.Epoch {
		t.Errorf("drain epoch %d, want > %d", rep.Epoch, l.Epoch)
	}
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"FIRST/0"})
	h.wantStrings("notes", h.notes("s1"), []string{process.text("proc_restart")})
}

// Issue 3: a watched completion ran as a turn; the viewer leaves, a new
// drainer starts, the producer re-offers: duplicate, no turn, no note.
func executedTurnStaysATurn(t *testing.T, h *harness) {
	for _, p := range producers {
		session := "s-" + p.name
		name := p.name + "_ran"
		h.openSession(session)
		v, err := h.svc.AddViewer(h.ctx, session, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		r := h.offer(session, p.name, []string{p.id(name)}, p.text(name), "")
		h.drain(session)
		h.wantState(r.Admission.ID, "done/completed/turn")
		if err := h.store.RemoveViewer(h.ctx, session, v.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: session, Holder: "restarted", TTL: time.Second, Now: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		again := h.offer(session, p.name, []string{p.id(name)}, p.text(name), "")
		if again.Result != backend.ResultDuplicate || again.Admission.ID != r.Admission.ID {
			t.Errorf("%s re-offer: %q %s, want duplicate of %s", p.name, again.Result, again.Admission.ID, r.Admission.ID)
		}
		if rep := h.drain(session); len(rep.Executed) != 0 {
			t.Errorf("%s: the drain after the re-offer executed %d", p.name, len(rep.Executed))
		}
		if n := h.notes(session); len(n) != 0 {
			t.Errorf("%s: notes %q, want none", p.name, n)
		}
		if n := len(h.admissions(session, backend.AdmissionFilter{})); n != 1 {
			t.Errorf("%s: %d admissions, want 1", p.name, n)
		}
	}
	h.wantStrings("turns", h.turnTexts(), []string{process.text("process_ran") + "/0", producers[1].text("delegation_ran") + "/0"})
}

// Issue 3: drainer A's turn is in its handler past A's lease; drainer B
// takes over (new epoch), finds A's admission unknown, interrupts it under
// --on-unknown interrupt and runs the next. A's settle is fenced: its reply
// is written nowhere.
func fencingRace(t *testing.T, h *harness) {
	a := h.human("s1", "A-TEXT")
	b := h.human("s1", "B-TEXT")
	release := filepath.Join(t.TempDir(), "release")
	type result struct {
		rep admission.DrainReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		opt := admission.DrainOptions{Principal: owner, Holder: "drainer-a", Lease: 30 * time.Second, Handler: h.handler("HQT_WAIT=" + release)}
		rep, err := h.svc.Drain(h.ctx, "s1", opt)
		done <- result{rep, err}
	}()
	h.eventually("A's handler to start", func() bool { return len(h.turns()) == 1 })
	epochA := h.session("s1").Epoch

	// B's clock is past A's lease expiry.
	late := &admission.Service{Store: h.store, Now: func() time.Time { return time.Now().Add(time.Hour) }}
	repB, err := late.Drain(h.ctx, "s1", admission.DrainOptions{
		Principal: owner, Holder: "drainer-b", Lease: 30 * time.Second, Handler: h.handler(), OnUnknown: admission.OnUnknownInterrupt,
	})
	if err != nil {
		t.Fatalf("drainer B: %v", err)
	}
	if repB.Epoch <= epochA || repB.Turns != 1 {
		t.Errorf("drainer B: epoch %d (A had %d), %d turns; want a newer epoch and 1 turn", repB.Epoch, epochA, repB.Turns)
	}
	h.wantState(a.Admission.ID, "done/interrupted/turn")
	h.wantState(b.Admission.ID, "done/completed/turn")

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var ra result
	select {
	case ra = <-done:
	case <-time.After(waitLimit):
		t.Fatal("drainer A did not return")
	}
	if !errors.Is(ra.err, backend.ErrFenced) {
		t.Errorf("drainer A: %v, want fenced", ra.err)
	}
	if ra.rep.Turns != 0 || len(ra.rep.Executed) != 0 {
		t.Errorf("drainer A reported %d turns, %d executed; want none", ra.rep.Turns, len(ra.rep.Executed))
	}
	h.wantStrings("transcript s1", h.roles("s1"), []string{"user:B-TEXT", "assistant:reply to B-TEXT notes_seen=0"})
	h.wantState(a.Admission.ID, "done/interrupted/turn")
	h.wantStrings("turns", h.turnTexts(), []string{"A-TEXT/0", "B-TEXT/0"})
}

// Issue 3: by default an unknown admission pauses the queue (ErrPaused
// naming it); after an operator requeues it, the next drain runs it.
func unknownPausesByDefault(t *testing.T, h *harness) {
	u1 := h.human("s1", "U1")
	u2 := h.human("s1", "U2")
	h.makeUnknown("s1", u1.Admission.ID)
	rep, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, admission.ErrPaused) || !errors.Is(err, backend.ErrAttention) {
		t.Fatalf("drain: %v, want paused", err)
	}
	if !contains(err.Error(), u1.Admission.ID) {
		t.Errorf("pause error %q does not name %s", err, u1.Admission.ID)
	}
	if len(rep.Executed) != 0 {
		t.Errorf("paused drain executed %d", len(rep.Executed))
	}
	h.wantState(u1.Admission.ID, "unknown//turn")
	h.wantState(u2.Admission.ID, "queued//")
	h.wantStrings("turns", h.turnTexts(), nil)
	if s := h.session("s1"); s.State() != backend.StatePaused {
		t.Errorf("session state %s, want paused", s.State())
	}
	// Paused stays paused until someone resolves it.
	if _, err := h.svc.Drain(h.ctx, "s1", h.opts()); !errors.Is(err, admission.ErrPaused) {
		t.Errorf("second drain: %v, want paused", err)
	}
	if _, err := h.store.Resolve(h.ctx, u1.Admission.ID, backend.ResolveRequeue, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"U1/0", "U2/0"})
	h.wantState(u1.Admission.ID, "done/completed/turn")
	h.wantState(u2.Admission.ID, "done/completed/turn")
}

func unknownRequeuePolicy(t *testing.T, h *harness) {
	u1 := h.human("s1", "U1")
	h.human("s1", "U2")
	h.makeUnknown("s1", u1.Admission.ID)
	opt := h.opts()
	opt.OnUnknown = admission.OnUnknownRequeue
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if err != nil {
		t.Fatal(err)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"U1/0", "U2/0"})
	h.wantState(u1.Admission.ID, "done/completed/turn")
	if rep.Turns != 2 {
		t.Errorf("%d turns, want 2", rep.Turns)
	}
}

func unknownInterruptPolicy(t *testing.T, h *harness) {
	u1 := h.human("s1", "U1")
	h.human("s1", "U2")
	h.makeUnknown("s1", u1.Admission.ID)
	opt := h.opts()
	opt.OnUnknown = admission.OnUnknownInterrupt
	if _, err := h.svc.Drain(h.ctx, "s1", opt); err != nil {
		t.Fatal(err)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"U2/0"})
	h.wantState(u1.Admission.ID, "done/interrupted/turn")
	h.wantStrings("transcript s1", h.roles("s1"), []string{"user:U2", "assistant:reply to U2 notes_seen=0"})
}

func maxBound(t *testing.T, h *harness) {
	var ids []string
	for _, text := range []string{"M1", "M2", "M3"} {
		ids = append(ids, h.human("s1", text).Admission.ID)
	}
	opt := h.opts()
	opt.Max = 2
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Executed) != 2 {
		t.Errorf("executed %d, want 2", len(rep.Executed))
	}
	h.wantStrings("turns", h.turnTexts(), []string{"M1/0", "M2/0"})
	h.wantState(ids[2], "queued//")
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"M1/0", "M2/0", "M3/0"})
}

// No handler: a turn at the head fails with ErrNoHandler before anything is
// written (not even a new epoch); notes still happen, and a due turn after
// them leaves its admission queued.
func noHandler(t *testing.T, h *harness) {
	first := h.human("s0", "FIRST")
	before := h.session("s0")
	if _, err := h.svc.Drain(h.ctx, "s0", admission.DrainOptions{Principal: owner}); !errors.Is(err, admission.ErrNoHandler) {
		t.Fatalf("drain: %v, want no handler", err)
	}
	if after := h.session("s0"); after.Epoch != before.Epoch || after.Generation != before.Generation || after.LeaseHolder != before.LeaseHolder {
		t.Errorf("session after a drain with no handler: epoch %d→%d, generation %d→%d, holder %q→%q; want unchanged",
			before.Epoch, after.Epoch, before.Generation, after.Generation, before.LeaseHolder, after.LeaseHolder)
	}
	h.wantState(first.Admission.ID, "queued//")

	h.openSession("s1")
	c := h.offer("s1", "process", []string{process.id("proc_nh")}, process.text("proc_nh"), "")
	u := h.human("s1", "NEEDS-A-HANDLER")
	rep, err := h.svc.Drain(h.ctx, "s1", admission.DrainOptions{Principal: owner})
	if !errors.Is(err, admission.ErrNoHandler) || !errors.Is(err, backend.ErrInvalid) {
		t.Fatalf("drain: %v, want no handler", err)
	}
	if rep.Notes != 1 {
		t.Errorf("%d notes, want 1", rep.Notes)
	}
	h.wantState(c.Admission.ID, "done/completed/note")
	h.wantState(u.Admission.ID, "queued//")
	if s := h.session("s1"); s.Queued != 1 || s.Running != 0 {
		t.Errorf("session: %d queued, %d running; want 1, 0", s.Queued, s.Running)
	}
}

// A failed turn is settled failed with the stderr tail; the drain goes on
// and then reports attention.
func handlerFails(t *testing.T, h *harness) {
	ok1 := h.human("s1", "ok-1")
	bad := h.human("s1", "bad-2")
	ok3 := h.human("s1", "ok-3")
	opt := h.opts()
	opt.Handler = h.handler("HQT_FAIL_ON=bad", "HQT_FAIL_CODE=3")
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if !errors.Is(err, backend.ErrAttention) || errors.Is(err, admission.ErrPaused) {
		t.Errorf("drain: %v, want attention (not paused)", err)
	}
	if rep.Turns != 2 || rep.Failed != 1 {
		t.Errorf("report: %d turns, %d failed; want 2, 1", rep.Turns, rep.Failed)
	}
	h.wantState(ok1.Admission.ID, "done/completed/turn")
	a := h.wantState(bad.Admission.ID, "done/failed/turn")
	if !contains(a.Error, "exit status 3") || !contains(a.Error, "boom: bad-2") {
		t.Errorf("failed turn error %q, want the exit status and the stderr tail", a.Error)
	}
	h.wantState(ok3.Admission.ID, "done/completed/turn")
	h.wantStrings("transcript s1", h.roles("s1"), []string{
		"user:ok-1", "assistant:reply to ok-1 notes_seen=0", "user:ok-3", "assistant:reply to ok-3 notes_seen=0",
	})
	failed := h.admissions("s1", backend.AdmissionFilter{Outcomes: []backend.Outcome{backend.OutcomeFailed}})
	if len(failed) != 1 || failed[0].ID != bad.Admission.ID {
		t.Errorf("failed admissions %v, want [%s]", failed, bad.Admission.ID)
	}
}

func handlerTimeout(t *testing.T, h *harness) {
	slow := h.human("s1", "slow")
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	opt := h.opts()
	opt.Handler = h.handler("HQT_SLEEP=10m", "HQT_CHILD="+pidFile)
	// Long enough for the handler to start its child and write to stderr
	// on a busy machine; the assertions below do not depend on the time.
	opt.Handler.Timeout = 3 * time.Second
	_, err := h.svc.Drain(h.ctx, "s1", opt)
	if !errors.Is(err, backend.ErrAttention) {
		t.Errorf("drain: %v, want attention", err)
	}
	a := h.wantState(slow.Admission.ID, "done/failed/turn")
	if !contains(a.Error, "timeout after 3s") || !contains(a.Error, "sleeping 10m0s") {
		t.Errorf("timed-out turn error %q, want the timeout and the stderr tail", a.Error)
	}
	if n := len(h.messages("s1")); n != 0 {
		t.Errorf("%d messages after a timeout, want 0", n)
	}
	// The timeout killed the handler's whole process group, its child too.
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the handler's child pid: %v", err)
	}
	h.eventually("the handler's child to be killed", func() bool { return processGone(string(pid)) })
}

// ctx ends while a turn runs: the turn finishes within the grace, is
// settled, the lease is released, and Drain reports ctx's error.
func graceLetsTheTurnFinish(t *testing.T, h *harness) {
	g := h.human("s1", "G")
	h.human("s1", "NOT-TAKEN")
	release := filepath.Join(t.TempDir(), "release")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	type result struct {
		rep admission.DrainReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		opt := h.opts()
		opt.Handler = h.handler("HQT_WAIT=" + release)
		opt.Grace = 10 * time.Minute
		rep, err := h.svc.Drain(ctx, "s1", opt)
		done <- result{rep, err}
	}()
	h.eventually("the handler to start", func() bool { return len(h.turns()) == 1 })
	cancel()
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("drain: %v, want canceled", r.err)
	}
	if r.rep.Turns != 1 {
		t.Errorf("%d turns, want 1", r.rep.Turns)
	}
	h.wantState(g.Admission.ID, "done/completed/turn")
	h.wantStrings("transcript s1", h.roles("s1"), []string{"user:G", "assistant:reply to G notes_seen=0"})
	if s := h.session("s1"); s.LeaseLive(time.Now()) || s.Queued != 1 {
		t.Errorf("after the stop: lease live %v (holder %q), %d queued; want released, 1", s.LeaseLive(time.Now()), s.LeaseHolder, s.Queued)
	}
}

func graceExpiredInterrupts(t *testing.T, h *harness) {
	g := h.human("s1", "G")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		opt := h.opts()
		opt.Handler = h.handler("HQT_SLEEP=10m")
		_, err := h.svc.Drain(ctx, "s1", opt) // Grace 0
		done <- err
	}()
	h.eventually("the handler to start", func() bool { return len(h.turns()) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("drain: %v, want canceled", err)
	}
	a := h.wantState(g.Admission.ID, "done/interrupted/turn")
	if !contains(a.Error, "drain was stopped") {
		t.Errorf("interrupted turn error %q", a.Error)
	}
	if n := len(h.messages("s1")); n != 0 {
		t.Errorf("%d messages, want 0", n)
	}
}

// The drain lease is renewed while a turn runs longer than it.
func leaseRenewed(t *testing.T, h *harness) {
	h.human("s1", "LONG")
	release := filepath.Join(t.TempDir(), "release")
	done := make(chan error, 1)
	go func() {
		opt := h.opts()
		opt.Lease = 1500 * time.Millisecond
		opt.Handler = h.handler("HQT_WAIT=" + release)
		_, err := h.svc.Drain(h.ctx, "s1", opt)
		done <- err
	}()
	h.eventually("the handler to start", func() bool { return len(h.turns()) == 1 })
	first := h.session("s1").LeaseExpiresAt
	h.eventually("the lease to be renewed", func() bool { return h.session("s1").LeaseExpiresAt.After(first) })
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("drain: %v", err)
	}
}

// A live lease held by another drainer: ErrLeaseHeld at once, nothing run.
func leaseHeld(t *testing.T, h *harness) {
	u := h.human("s1", "HELD")
	if _, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: "s1", Holder: "other", TTL: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, backend.ErrLeaseHeld) || !errors.Is(err, backend.ErrFenced) {
		t.Errorf("drain: %v, want lease held", err)
	}
	h.wantState(u.Admission.ID, "queued//")
	// With Wait it waits until ctx ends.
	ctx, cancel := context.WithTimeout(h.ctx, 600*time.Millisecond)
	defer cancel()
	opt := h.opts()
	opt.Wait = true
	if _, err := h.svc.Drain(ctx, "s1", opt); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("drain --wait: %v, want the deadline", err)
	}
	h.wantStrings("turns", h.turnTexts(), nil)
}

// Follow: inputs admitted while the drainer waits are executed as they
// arrive, woken by store events.
func follow(t *testing.T, h *harness) {
	h.openSession("s1")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	type result struct {
		rep admission.DrainReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		opt := h.opts()
		opt.Follow = true
		opt.Holder = "follower"
		rep, err := h.svc.Drain(ctx, "s1", opt)
		done <- result{rep, err}
	}()
	h.eventually("the follower to take the lease", func() bool { return h.session("s1").LeaseHolder == "follower" })
	f1 := h.human("s1", "F1")
	h.eventually("F1 to run", func() bool { return h.admission(f1.Admission.ID).Status == backend.StatusDone })
	f2 := h.offer("s1", "process", []string{process.id("proc_follow")}, process.text("proc_follow"), "")
	h.eventually("the completion to be noted", func() bool { return h.admission(f2.Admission.ID).Status == backend.StatusDone })
	cancel()
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("follow: %v, want canceled", r.err)
	}
	if r.rep.Turns != 1 || r.rep.Notes != 1 {
		t.Errorf("follow report: %d turns, %d notes; want 1, 1", r.rep.Turns, r.rep.Notes)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"F1/0"})
	h.wantStrings("notes", h.notes("s1"), []string{process.text("proc_follow")})
}

// DrainAll drains every session with work, skipping one whose lease is
// held elsewhere.
func drainAll(t *testing.T, h *harness) {
	for _, s := range []string{"a", "b", "c", "held"} {
		h.human(s, "IN-"+s)
	}
	h.openSession("idle")
	if _, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: "held", Holder: "other", TTL: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	reports, err := h.svc.DrainAll(h.ctx, h.opts(), 2)
	if err != nil {
		t.Fatalf("drain --all: %v", err)
	}
	var got []string
	for _, r := range reports {
		got = append(got, fmt.Sprintf("%s:%d", r.Session, r.Turns))
	}
	h.wantStrings("reports", got, []string{"a:1", "b:1", "c:1"})
	if s := h.session("held"); s.Queued != 1 {
		t.Errorf("held session: %d queued, want 1", s.Queued)
	}
	if n := len(h.turns()); n != 3 {
		t.Errorf("%d turns, want 3", n)
	}
}

// Issue 4 (4): human input to a closed session is refused unless Reopen.
func humanToClosedSession(t *testing.T, h *harness) {
	h.openSession("s1")
	if _, err := h.store.CloseSession(h.ctx, "s1", "cli_close", time.Now()); err != nil {
		t.Fatal(err)
	}
	in := admission.Input{Session: "s1", Text: "LATE", Principal: owner}
	if _, err := h.svc.Admit(h.ctx, in); !errors.Is(err, backend.ErrClosed) || !errors.Is(err, backend.ErrConflict) {
		t.Errorf("admit to a closed session: %v, want closed", err)
	}
	if n := len(h.admissions("s1", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("%d admissions after the refusal, want 0", n)
	}
	in.Reopen = true
	r, err := h.svc.Admit(h.ctx, in)
	if err != nil || r.Result != backend.ResultAdmitted {
		t.Fatalf("admit --reopen: %q %v", r.Result, err)
	}
	if tr := h.transcript("s1"); tr.Ended() || tr.EndReason != "" {
		t.Errorf("transcript after --reopen: ended %v reason %q, want open", tr.EndedAt, tr.EndReason)
	}
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"LATE/0"})
}

// A human input admitted while the session's transcript was open, whose
// session is then switched to a closed transcript of its own, is not run as
// a turn into the closed transcript: it is settled failed ("closed"), kept
// and visible, and the closed transcript is unchanged.
func humanQueuedThenSwitchedToClosed(t *testing.T, h *harness) {
	h.openSession("s1")
	if _, err := h.store.CloseSession(h.ctx, "s1", "cli_close", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Switch(h.ctx, "s1", "s1-b", time.Now()); err != nil {
		t.Fatal(err)
	}
	a := h.human("s1", "QUEUED").Admission
	if _, err := h.store.Switch(h.ctx, "s1", "s1", time.Now()); err != nil {
		t.Fatal(err)
	}
	rep, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, backend.ErrAttention) {
		t.Errorf("drain: %v, want an error needing attention", err)
	}
	if rep.Failed != 1 {
		t.Errorf("report: %d failed, want 1", rep.Failed)
	}
	got := h.admission(a.ID)
	if got.Status != backend.StatusDone || got.Outcome != backend.OutcomeFailed || got.Mode != "" ||
		got.Error != "closed: transcript s1 ended (cli_close)" {
		t.Errorf("admission: %s/%s mode %q error %q, want done/failed, no mode, closed", got.Status, got.Outcome, got.Mode, got.Error)
	}
	h.wantStrings("turns", h.turnTexts(), nil)
	if tr := h.transcript("s1"); tr.MessageCount != 0 || tr.EndReason != "cli_close" {
		t.Errorf("closed transcript: %d messages, reason %q; want 0, cli_close", tr.MessageCount, tr.EndReason)
	}
}

// Issue 4 (1): a completion for a session closed with reason becomes one
// note on that closed transcript; it does not reopen it and never reaches
// the session opened next.
func closedSessionNote(t *testing.T, h *harness, p producer, reason string) {
	name := p.name + "_after_close"
	h.openSession("lc7")
	if _, err := h.store.CloseSession(h.ctx, "lc7", reason, time.Now()); err != nil {
		t.Fatal(err)
	}
	closed := h.transcript("lc7")
	h.openSession("lc7-next")
	if _, err := h.svc.AddViewer(h.ctx, "lc7-next", time.Hour); err != nil {
		t.Fatal(err)
	}
	r := h.offer("lc7", p.name, []string{p.id(name)}, p.text(name), "lc7")
	if r.Result != backend.ResultAdmitted {
		t.Fatalf("offer: %q", r.Result)
	}
	h.drain("lc7")
	h.drain("lc7-next")
	h.wantStrings("notes on lc7", h.notes("lc7"), []string{p.text(name)})
	tr := h.transcript("lc7")
	if !tr.Ended() || tr.EndReason != reason || !tr.EndedAt.Equal(closed.EndedAt) {
		t.Errorf("lc7 after the note: ended %v reason %q, want %v %q", tr.EndedAt, tr.EndReason, closed.EndedAt, reason)
	}
	if tr.MessageCount != closed.MessageCount+1 {
		t.Errorf("lc7: %d messages, want %d", tr.MessageCount, closed.MessageCount+1)
	}
	h.wantStrings("turns", h.turnTexts(), nil)
	a := h.wantState(r.Admission.ID, "done/completed/note")
	if a.DeliveredTo != "lc7" {
		t.Errorf("delivered to %q, want lc7", a.DeliveredTo)
	}
	if n := len(h.admissions("lc7-next", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("lc7-next: %d admissions, want 0", n)
	}
	if n := len(h.messages("lc7-next")); n != 0 {
		t.Errorf("lc7-next: %d messages, want 0", n)
	}
}

// Issue 4 (2): compressed, then the tip closed: a completion pinned to the
// ancestor is one note on the closed tip (even with a viewer), none on the
// ancestor, nothing on the next session.
func compressedThenClosed(t *testing.T, h *harness, p producer, reason string) {
	name := p.name + "_compressed"
	h.openSession("lc7")
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	if cur := h.session("lc7").CurrentTranscript; cur != "lc7-tip" {
		t.Fatalf("current transcript after compress: %q", cur)
	}
	if _, err := h.store.CloseSession(h.ctx, "lc7", reason, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.openSession("lc7-next")
	for _, s := range []string{"lc7", "lc7-next"} {
		if _, err := h.svc.AddViewer(h.ctx, s, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	r := h.offer("lc7", p.name, []string{p.id(name)}, p.text(name), "lc7")
	h.drain("lc7")
	h.drain("lc7-next")
	h.wantStrings("turns", h.turnTexts(), nil)
	h.wantStrings("notes on lc7-tip", h.notes("lc7-tip"), []string{p.text(name)})
	h.wantStrings("notes on lc7", h.notes("lc7"), nil)
	if tip := h.transcript("lc7-tip"); !tip.Ended() || tip.EndReason != reason {
		t.Errorf("lc7-tip: ended %v reason %q, want ended %q", tip.EndedAt, tip.EndReason, reason)
	}
	if anc := h.transcript("lc7"); anc.EndReason != backend.ReasonCompression {
		t.Errorf("lc7: end reason %q, want compression", anc.EndReason)
	}
	var outcomes []string
	for _, a := range h.admissions("lc7", backend.AdmissionFilter{}) {
		outcomes = append(outcomes, string(a.Outcome))
	}
	h.wantStrings("lc7 outcomes", outcomes, []string{"completed"})
	if a := h.admission(r.Admission.ID); a.DeliveredTo != "lc7-tip" || a.Mode != backend.ModeNote {
		t.Errorf("delivered to %q as %q, want lc7-tip note", a.DeliveredTo, a.Mode)
	}
	if n := len(h.admissions("lc7-next", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("lc7-next: %d admissions, want 0", n)
	}
	if n := len(h.messages("lc7-next")); n != 0 {
		t.Errorf("lc7-next: %d messages, want 0", n)
	}
}

// Issue 4 (3): once the session names another lineage, a completion pinned
// to the old ancestor is misrouted: failed "misrouted", kept, listed, and
// written to no transcript.
func misrouted(t *testing.T, h *harness, p producer) {
	name := p.name + "_misrouted"
	h.openSession("lc7")
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Switch(h.ctx, "lc7", "lc7-other", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.AddViewer(h.ctx, "lc7", time.Hour); err != nil {
		t.Fatal(err)
	}
	r := h.offer("lc7", p.name, []string{p.id(name)}, p.text(name), "lc7")
	rep, err := h.svc.Drain(h.ctx, "lc7", h.opts())
	if !errors.Is(err, backend.ErrAttention) {
		t.Errorf("drain: %v, want attention", err)
	}
	if rep.Failed != 1 || rep.Turns != 0 || rep.Notes != 0 {
		t.Errorf("report: %d failed, %d turns, %d notes; want 1, 0, 0", rep.Failed, rep.Turns, rep.Notes)
	}
	a := h.wantState(r.Admission.ID, "done/failed/")
	if a.Error != "misrouted" {
		t.Errorf("error %q, want misrouted", a.Error)
	}
	failed := h.admissions("lc7", backend.AdmissionFilter{Outcomes: []backend.Outcome{backend.OutcomeFailed}})
	if len(failed) != 1 || failed[0].ID != r.Admission.ID {
		t.Errorf("failed admissions %d, want exactly %s", len(failed), r.Admission.ID)
	}
	for _, tr := range []string{"lc7", "lc7-tip", "lc7-other"} {
		if n := len(h.messages(tr)); n != 0 {
			t.Errorf("%s: %d messages, want 0", tr, n)
		}
	}
	h.wantStrings("turns", h.turnTexts(), nil)
}

// Issue 4 (route must name the tip): ResolveTarget and Lineage directly.
func lineageAndResolveTarget(t *testing.T, h *harness) {
	h.openSession("lc7")
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-mid", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	lin, err := h.svc.Lineage(h.ctx, "lc7-mid")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range lin {
		ids = append(ids, tr.ID)
	}
	h.wantStrings("lineage", ids, []string{"lc7", "lc7-mid", "lc7-tip"})
	pinned := backend.Admission{Kind: backend.KindAutomation, PinnedTarget: "lc7", Session: "lc7"}
	resolve := func() (string, bool) {
		target, mis, err := h.svc.ResolveTarget(h.ctx, h.session("lc7"), pinned)
		if err != nil {
			t.Fatal(err)
		}
		return target, mis
	}
	if target, mis := resolve(); target != "lc7-tip" || mis {
		t.Errorf("pinned to the root, tip current: %q misrouted %v; want lc7-tip", target, mis)
	}
	if _, err := h.store.Switch(h.ctx, "lc7", "lc7-other", time.Now()); err != nil {
		t.Fatal(err)
	}
	if target, mis := resolve(); !mis {
		t.Errorf("after switching away: %q, want misrouted", target)
	}
	// Switching back to the tip makes it deliverable again.
	if _, err := h.store.Switch(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	if target, mis := resolve(); target != "lc7-tip" || mis {
		t.Errorf("after switching back: %q misrouted %v; want lc7-tip", target, mis)
	}
	human := backend.Admission{Kind: backend.KindHuman, Session: "lc7"}
	if target, mis, err := h.svc.ResolveTarget(h.ctx, h.session("lc7"), human); err != nil || target != "lc7-tip" || mis {
		t.Errorf("human: %q %v %v, want the current transcript", target, mis, err)
	}
}

var errInjected = errors.New("injected fault: not a store condition")

// Issue 4 (5): a transient target read defers (stays queued, Deferred > 0,
// then delivered); any other error surfaces with the admission queued.
func transientTargetRead(t *testing.T, newStore func(t *testing.T) backend.Store, p producer) {
	h := newHarness(t, newStore)
	fail := func(n int, err error) {
		h.faults.Inject(backendtest.Fault{Method: "GetTranscript", Times: n, Err: err})
	}
	svc := h.svc
	h.openSession("s1")
	r := h.offer("s1", p.name, []string{p.id(p.name + "_deferred")}, p.text(p.name+"_deferred"), "")
	fail(2, fmt.Errorf("read transcript s1: database is locked: %w", backend.ErrUnavailable))
	rep, err := svc.Drain(h.ctx, "s1", h.opts())
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if rep.Deferred != 2 || rep.Notes != 1 {
		t.Errorf("report: %d deferred, %d notes; want 2, 1", rep.Deferred, rep.Notes)
	}
	h.wantState(r.Admission.ID, "done/completed/note")
	h.wantStrings("notes", h.notes("s1"), []string{p.text(p.name + "_deferred")})

	r2 := h.offer("s1", p.name, []string{p.id(p.name + "_bug")}, p.text(p.name+"_bug"), "")
	fail(1, errInjected)
	_, err = svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, errInjected) || errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("drain with an unexpected error: %v, want the injected error surfaced", err)
	}
	if code := backend.CodeOf(err); code != backend.CodeInternal {
		t.Errorf("drain with an unexpected error: code %s, want internal (exit 1)", code)
	}
	h.wantState(r2.Admission.ID, "queued//")
	if n := len(h.notes("s1")); n != 1 {
		t.Errorf("%d notes after the failed drain, want 1", n)
	}
	// A target the store says is not found (the session's current
	// transcript is gone: a store that contradicts itself) is a bug too:
	// exit 1, not the not-found of an unknown session.
	fail(1, backend.Errorf(backend.ErrNotFound, "transcript s1"))
	_, err = svc.Drain(h.ctx, "s1", h.opts())
	if code := backend.CodeOf(err); code != backend.CodeInternal || !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("drain with the current transcript not found: %v (code %s), want code internal wrapping the not-found", err, code)
	}
	h.wantState(r2.Admission.ID, "queued//")
	h.drain("s1")
	h.wantState(r2.Admission.ID, "done/completed/note")
}

// DrainAll with Follow drains sessions as work arrives, each under its own
// lease, woken by store events, until ctx ends.
func drainAllFollow(t *testing.T, h *harness) {
	h.openSession("a")
	h.openSession("b")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	type result struct {
		reps []admission.DrainReport
		err  error
	}
	done := make(chan result, 1)
	go func() {
		opt := h.opts()
		opt.Follow = true
		reps, err := h.svc.DrainAll(ctx, opt, 2)
		done <- result{reps, err}
	}()
	ra := h.human("a", "IN-a")
	rb := h.offer("b", "process", []string{process.id("proc_all")}, process.text("proc_all"), "")
	h.eventually("both admissions to run", func() bool {
		return h.admission(ra.Admission.ID).Status == backend.StatusDone && h.admission(rb.Admission.ID).Status == backend.StatusDone
	})
	rc := h.human("a", "IN-a-2")
	h.eventually("the third admission to run", func() bool { return h.admission(rc.Admission.ID).Status == backend.StatusDone })
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(waitLimit):
		t.Fatal("DrainAll with Follow did not return after ctx ended")
	}
	if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, backend.ErrAttention) {
		t.Errorf("drain --all --follow: %v, want only canceled", r.err)
	}
	turns, notes := 0, 0
	for _, rep := range r.reps {
		if len(rep.Executed) == 0 {
			t.Errorf("report of %s with nothing executed: %+v err=%v", rep.Session, rep, r.err)
		}
		turns += rep.Turns
		notes += rep.Notes
	}
	if turns != 2 || notes != 1 {
		t.Errorf("reports: %d turns, %d notes; want 2, 1", turns, notes)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"IN-a/0", "IN-a-2/0"})
	h.wantStrings("notes on b", h.notes("b"), []string{process.text("proc_all")})
}
