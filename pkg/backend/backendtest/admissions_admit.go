package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var admissionsAdmitTests = []suiteTest{
	{name: "Admit/HumanNew", fn: testAdmitHumanNew},
	{name: "Admit/RequestID", fn: testAdmitRequestID},
	{name: "Admit/CreateSession", fn: testAdmitCreateSession},
	{name: "Admit/Closed", fn: testAdmitClosed},
	{name: "Admit/AutomationIdentities", fn: testAdmitIdentities},
	{name: "Admit/AutomationPartialReoffer", fn: testAdmitPartialReoffer},
	{name: "Admit/PayloadDiffers", fn: testAdmitPayloadDiffers},
	{name: "Admit/PinnedTarget", fn: testAdmitPinnedTarget},
	{name: "Admit/Batch", fn: testAdmitBatch},
	{name: "Admit/BatchOneSessionFails", fn: testAdmitBatchOneSessionFails},
	{name: "Admit/LargeBatch", fn: testAdmitLargeBatch},
	{name: "Admit/SeqIncreasing", fn: testAdmitSeq},
	{name: "Admit/ResultIsStored", fn: testAdmitResultIsStored},
}

func testAdmitHumanNew(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	const id = "0123456789abcdef0123456789abcdef"
	res := admit1(t, s, backend.AdmitRequest{
		ID: id, Session: "s1", Kind: backend.KindHuman, Principal: Owner,
		Payload: Payload("hello <world> & co"), Now: at(time.Minute),
	})
	noErr(t, "admit", res.Err)
	if res.Result != backend.ResultAdmitted {
		t.Fatalf("result %q, want admitted", res.Result)
	}
	got := res.Admission
	want := backend.Admission{
		ID: id, Session: "s1", Seq: got.Seq, Kind: backend.KindHuman, Principal: Owner,
		Payload: Payload("hello <world> & co"), Status: backend.StatusQueued, AdmittedAt: at(time.Minute),
	}
	diff(t, "admitted admission", want, got)
	diff(t, "GetAdmission", got, getAdmission(t, s, id))
	// Without a request id, the same input again is a new admission.
	again := human(t, s, "s1", "hello <world> & co")
	if again.ID == id || again.Seq <= got.Seq {
		t.Errorf("second input without request id: id %s seq %d, want a new admission after seq %d", again.ID, again.Seq, got.Seq)
	}
	// The store gives an id when the request has none.
	if again.ID == "" {
		t.Errorf("admission without an id")
	}
}

func testAdmitRequestID(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	noErr(t, "grant", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleWriter}))
	req := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "r-1", Payload: Payload("once")}
	first := admit1(t, s, req)
	noErr(t, "first admit", first.Err)
	if first.Result != backend.ResultAdmitted || first.Admission.RequestID != "r-1" {
		t.Fatalf("first admit: result %q request id %q", first.Result, first.Admission.RequestID)
	}
	req.Now = at(time.Minute)
	dup := admit1(t, s, req)
	noErr(t, "same request again", dup.Err)
	if dup.Result != backend.ResultDuplicate {
		t.Fatalf("same request id and payload: result %q, want duplicate", dup.Result)
	}
	diff(t, "duplicate's admission", first.Admission, dup.Admission)
	diff(t, "duplicate's Duplicates", []string{first.Admission.ID}, dup.Duplicates)

	other := req
	other.Payload = Payload("twice")
	res := admit1(t, s, other)
	wantErr(t, "same request id, other payload", res.Err, backend.ErrConflict)
	if res.Err != nil && (res.Admission.ID != "" || res.Result != "") {
		t.Errorf("refused request has a result %q / admission %q", res.Result, res.Admission.ID)
	}
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(all) != 1 {
		t.Fatalf("after duplicate and conflict: %d admissions, want 1", len(all))
	}
	diff(t, "stored admission unchanged", first.Admission, all[0])

	// The key is (principal, request id): another principal may use it.
	mine := req
	mine.Principal = Other
	res = admit1(t, s, mine)
	noErr(t, "same request id by another principal", res.Err)
	if res.Result != backend.ResultAdmitted || res.Admission.ID == first.Admission.ID {
		t.Errorf("another principal's request id: result %q id %s, want a new admission", res.Result, res.Admission.ID)
	}

	// A duplicate stays a duplicate once the admission is done.
	l := acquire(t, s, "s1", "d", T0)
	c := claim(t, s, l, first.Admission.ID, T0)
	settleTurn(t, s, c, "ok", T0)
	dup = admit1(t, s, req)
	noErr(t, "request again after it ran", dup.Err)
	if dup.Result != backend.ResultDuplicate || dup.Admission.ID != first.Admission.ID || dup.Admission.Status != backend.StatusDone {
		t.Errorf("request again after it ran: result %q id %s status %s", dup.Result, dup.Admission.ID, dup.Admission.Status)
	}
}

func testAdmitCreateSession(t *testing.T, s backend.Store) {
	res := admit1(t, s, backend.AdmitRequest{Session: "new", Kind: backend.KindHuman, Principal: Other, Payload: Payload("x")})
	wantErr(t, "human to unknown session without CreateSession", res.Err, backend.ErrNotFound)
	_, err := s.GetSession(ctxOf(t), "new", time.Time{})
	wantErr(t, "session after refused admit", err, backend.ErrNotFound)

	res = admit1(t, s, backend.AdmitRequest{Session: "new", Kind: backend.KindHuman, Principal: Other, Payload: Payload("x"), CreateSession: true})
	noErr(t, "human to unknown session with CreateSession", res.Err)
	if res.Result != backend.ResultAdmitted {
		t.Fatalf("result %q", res.Result)
	}
	sess := getSession(t, s, "new")
	if sess.Owner != Other || sess.CurrentTranscript != "new" || sess.Queued != 1 {
		t.Errorf("created session: owner %q transcript %q queued %d", sess.Owner, sess.CurrentTranscript, sess.Queued)
	}
	getTranscript(t, s, "new")

	res = admit1(t, s, autoReq("ghost", "done", "id-1"))
	wantErr(t, "automation to unknown session", res.Err, backend.ErrNotFound)
	_, err = s.GetSession(ctxOf(t), "ghost", time.Time{})
	wantErr(t, "session after automation to unknown session", err, backend.ErrNotFound)
}

func testAdmitClosed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	_, err := s.CloseSession(ctxOf(t), "s1", "tui_close", T0)
	noErr(t, "close", err)
	req := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("hi")}
	res := admit1(t, s, req)
	wantErr(t, "human to closed session", res.Err, backend.ErrClosed)
	wantErr(t, "human to closed session", res.Err, backend.ErrConflict)
	if n := getSession(t, s, "s1").Queued; n != 0 {
		t.Fatalf("refused admit left %d queued", n)
	}
	// Automation input to a closed session is kept (it becomes a note).
	ar := auto(t, s, "s1", "late result", "late-1")
	if ar.Result != backend.ResultAdmitted {
		t.Fatalf("automation to closed session: result %q", ar.Result)
	}
	tr := getTranscript(t, s, "s1")
	if !tr.Ended() || tr.EndReason != "tui_close" {
		t.Fatalf("automation admit changed the closed transcript: %+v", tr)
	}
	req.Reopen = true
	res = admit1(t, s, req)
	noErr(t, "human with Reopen", res.Err)
	tr = getTranscript(t, s, "s1")
	if tr.Ended() || tr.EndReason != "" {
		t.Errorf("reopened transcript: ended_at %v reason %q", tr.EndedAt, tr.EndReason)
	}
	sess := getSession(t, s, "s1")
	if sess.Closed || sess.State() == backend.StateClosed || sess.Queued != 2 {
		t.Errorf("reopened session: closed %v state %s queued %d", sess.Closed, sess.State(), sess.Queued)
	}
}

func testAdmitIdentities(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := auto(t, s, "s1", "A done", "A")
	if a.Result != backend.ResultAdmitted {
		t.Fatalf("new identity: result %q", a.Result)
	}
	diff(t, "identities of new", map[string]string{"A": backend.ResultAdmitted}, a.Identities)
	diff(t, "admission identities", []string{"A"}, a.Admission.Identities)
	if a.Admission.Kind != backend.KindAutomation || a.Admission.Producer != Producer || a.Admission.Status != backend.StatusQueued {
		t.Errorf("automation admission: kind %s producer %q status %s", a.Admission.Kind, a.Admission.Producer, a.Admission.Status)
	}
	bc := auto(t, s, "s1", "B and C done", "B", "C")
	if bc.Result != backend.ResultCoalesced {
		t.Fatalf("two new identities: result %q, want coalesced", bc.Result)
	}
	diff(t, "coalesced identities", map[string]string{"B": backend.ResultAdmitted, "C": backend.ResultAdmitted}, bc.Identities)
	diff(t, "coalesced admission identities", []string{"B", "C"}, bc.Admission.Identities)

	re := auto(t, s, "s1", "A done", "A")
	if re.Result != backend.ResultDuplicate || re.PayloadDiffers {
		t.Fatalf("re-offer: result %q payload_differs %v", re.Result, re.PayloadDiffers)
	}
	diff(t, "re-offer resolves to the first admission", a.Admission, re.Admission)
	diff(t, "re-offer identities", map[string]string{"A": backend.ResultDuplicate}, re.Identities)
	diff(t, "re-offer duplicates", []string{a.Admission.ID}, re.Duplicates)

	// By C alone, a coalesced admission is found too.
	rc := auto(t, s, "s1", "C done", "C")
	if rc.Result != backend.ResultDuplicate || rc.Admission.ID != bc.Admission.ID {
		t.Errorf("re-offer of one identity of a coalesced admission: result %q id %s, want duplicate of %s", rc.Result, rc.Admission.ID, bc.Admission.ID)
	}

	// Terminal admissions still resolve their identities.
	_, err := s.Cancel(ctxOf(t), a.Admission.ID, T0)
	noErr(t, "cancel", err)
	re = auto(t, s, "s1", "A done", "A")
	if re.Result != backend.ResultDuplicate || re.Admission.ID != a.Admission.ID || re.Admission.Status != backend.StatusDone {
		t.Errorf("re-offer of a cancelled admission: result %q id %s status %s", re.Result, re.Admission.ID, re.Admission.Status)
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 2 {
		t.Errorf("%d admissions, want 2", n)
	}
	// Identities are per session: the same identity elsewhere is new.
	openSession(t, s, "s2")
	if other := auto(t, s, "s2", "A done", "A"); other.Result != backend.ResultAdmitted {
		t.Errorf("same identity in another session: result %q, want admitted", other.Result)
	}
}

func testAdmitPartialReoffer(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := auto(t, s, "s1", "A", "A")
	// The acknowledgement of [A] was lost; the producer now offers [A, B].
	ab := auto(t, s, "s1", "A and B", "A", "B")
	diff(t, "identities", map[string]string{"A": backend.ResultDuplicate, "B": backend.ResultAdmitted}, ab.Identities)
	if ab.Result != backend.ResultAdmitted {
		t.Errorf("result %q, want admitted (one new admission for B alone)", ab.Result)
	}
	if ab.Admission.ID == a.Admission.ID {
		t.Fatalf("no new admission for B")
	}
	diff(t, "new admission carries B alone", []string{"B"}, ab.Admission.Identities)
	diff(t, "duplicates", []string{a.Admission.ID}, ab.Duplicates)
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(all) != 2 {
		t.Fatalf("%d admissions, want 2", len(all))
	}
	diff(t, "A's admission unchanged", a.Admission, all[0])
	fa, err := s.FindIdentity(ctxOf(t), "s1", "A")
	noErr(t, "find A", err)
	fb, err := s.FindIdentity(ctxOf(t), "s1", "B")
	noErr(t, "find B", err)
	if fa.ID != a.Admission.ID || fb.ID != ab.Admission.ID {
		t.Errorf("find: A→%s B→%s, want %s %s", fa.ID, fb.ID, a.Admission.ID, ab.Admission.ID)
	}
}

func testAdmitPayloadDiffers(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := auto(t, s, "s1", "first", "A")
	re := auto(t, s, "s1", "second", "A")
	if re.Result != backend.ResultDuplicate || !re.PayloadDiffers {
		t.Fatalf("re-offer with another payload: result %q payload_differs %v, want duplicate true", re.Result, re.PayloadDiffers)
	}
	diff(t, "first committed payload wins", string(Payload("first")), string(getAdmission(t, s, a.Admission.ID).Payload))
	re = auto(t, s, "s1", "first", "A")
	if re.PayloadDiffers {
		t.Errorf("re-offer with the same payload: payload_differs true")
	}
}

func testAdmitPinnedTarget(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := auto(t, s, "s1", "x", "A")
	if a.Admission.PinnedTarget != "s1" {
		t.Errorf("default pinned target %q, want the current transcript s1", a.Admission.PinnedTarget)
	}
	_, err := s.Compress(ctxOf(t), "s1", "s1.2", T0)
	noErr(t, "compress", err)
	b := auto(t, s, "s1", "y", "B")
	if b.Admission.PinnedTarget != "s1.2" {
		t.Errorf("default pinned target after compression %q, want s1.2", b.Admission.PinnedTarget)
	}
	req := autoReq("s1", "z", "C")
	req.PinnedTarget = "s1"
	c := admit1(t, s, req)
	noErr(t, "admit with pinned target", c.Err)
	if c.Admission.PinnedTarget != "s1" {
		t.Errorf("explicit pinned target %q, want s1", c.Admission.PinnedTarget)
	}
	h := human(t, s, "s1", "human")
	if h.Kind != backend.KindHuman {
		t.Errorf("kind %q", h.Kind)
	}
}

func testAdmitBatch(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	reqs := []backend.AdmitRequest{
		{Session: "s1", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("one"), Now: T0},
		{Session: "s1", Kind: backend.KindHuman, Principal: Other, Payload: Payload("forbidden"), Now: T0},
		autoReq("s1", "auto", "A"),
		{Session: "ghost", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("nowhere"), Now: T0},
		autoReq("s1", "auto again", "A"),
		{Session: "s1", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("two"), Now: T0},
	}
	res, err := s.Admit(ctxOf(t), reqs)
	noErr(t, "admit batch", err)
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	wantResults := []string{backend.ResultAdmitted, "", backend.ResultAdmitted, "", backend.ResultDuplicate, backend.ResultAdmitted}
	for i, r := range res {
		if r.Result != wantResults[i] {
			t.Errorf("request %d: result %q err %v, want %q", i, r.Result, r.Err, wantResults[i])
		}
	}
	wantErr(t, "forbidden request of a batch", res[1].Err, backend.ErrForbidden)
	wantErr(t, "request to unknown session in a batch", res[3].Err, backend.ErrNotFound)
	if res[4].Admission.ID != res[2].Admission.ID {
		t.Errorf("identity offered twice in one batch: %s then %s", res[2].Admission.ID, res[4].Admission.ID)
	}
	if !(res[0].Admission.Seq < res[2].Admission.Seq && res[2].Admission.Seq < res[5].Admission.Seq) {
		t.Errorf("seqs in a batch not increasing in order: %d %d %d", res[0].Admission.Seq, res[2].Admission.Seq, res[5].Admission.Seq)
	}
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	var texts []string
	for _, a := range all {
		texts = append(texts, a.Text())
	}
	diff(t, "admitted in order", []string{"one", "auto", "two"}, texts)
}

// testAdmitLargeBatch admits 1,500 automation inputs to one session in one
// call (a --batch chunk and more; a store that gathers its writes must
// write them all, in slices or not), every third offering again the
// identity of the input before it: a duplicate of an admission made earlier
// in the same call. Then a second call re-offers the first and the last
// identity admitted.
func testAdmitLargeBatch(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	const n = 1500
	reqs := make([]backend.AdmitRequest, n)
	for i := range reqs {
		ident := fmt.Sprint("ev-", i)
		if i%3 == 2 {
			ident = fmt.Sprint("ev-", i-1)
		}
		reqs[i] = autoReq("s1", fmt.Sprint("event ", i), ident)
	}
	res, err := s.Admit(ctxOf(t), reqs)
	noErr(t, "admit 1,500 in one call", err)
	if len(res) != n {
		t.Fatalf("%d results for %d requests", len(res), n)
	}
	var want []string
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
		if i%3 == 2 {
			if r.Result != backend.ResultDuplicate || r.Admission.ID != res[i-1].Admission.ID || r.Admission.Text() != res[i-1].Admission.Text() {
				t.Fatalf("request %d re-offering ev-%d: %s of %s %q, want duplicate of %s", i, i-1, r.Result, r.Admission.ID, r.Admission.Text(), res[i-1].Admission.ID)
			}
			continue
		}
		if r.Result != backend.ResultAdmitted {
			t.Fatalf("request %d: %s, want admitted", i, r.Result)
		}
		want = append(want, fmt.Sprint("event ", i))
	}
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	var texts []string
	for i, a := range all {
		texts = append(texts, a.Text())
		if i > 0 && a.Seq <= all[i-1].Seq {
			t.Fatalf("admission %d: seq %d after %d", i, a.Seq, all[i-1].Seq)
		}
		if len(a.Identities) != 1 || a.Status != backend.StatusQueued {
			t.Fatalf("admission %d: identities %v, status %s", i, a.Identities, a.Status)
		}
	}
	diff(t, "admitted in order", want, texts)
	again, err := s.Admit(ctxOf(t), []backend.AdmitRequest{autoReq("s1", "event 0", "ev-0"), autoReq("s1", "event 1498", "ev-1498")})
	noErr(t, "re-offer", err)
	for i, r := range again {
		if r.Err != nil || r.Result != backend.ResultDuplicate || r.PayloadDiffers {
			t.Errorf("re-offer %d: %s %v (payload differs %v), want a duplicate", i, r.Result, r.Err, r.PayloadDiffers)
		}
	}
	if again[0].Admission.ID != res[0].Admission.ID || again[1].Admission.ID != res[1498].Admission.ID {
		t.Errorf("re-offers found %s and %s, want %s and %s", again[0].Admission.ID, again[1].Admission.ID, res[0].Admission.ID, res[1498].Admission.ID)
	}
}

func testAdmitSeq(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	var last uint64
	for i := 0; i < 12; i++ {
		var a backend.Admission
		if i%3 == 0 {
			a = auto(t, s, "s1", "a", fmt.Sprint("id-", i)).Admission
			auto(t, s, "s1", "a", fmt.Sprint("id-", i)) // a duplicate takes no seq
		} else {
			a = human(t, s, "s1", fmt.Sprint("h", i))
		}
		if i > 0 && a.Seq <= last {
			t.Fatalf("admission %d: seq %d not after %d", i, a.Seq, last)
		}
		last = a.Seq
	}
	sess := getSession(t, s, "s1")
	if sess.NextSeq <= last {
		t.Errorf("session next seq %d not after the last seq %d", sess.NextSeq, last)
	}
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(all) != 12 {
		t.Fatalf("%d admissions, want 12", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatalf("listing not in seq order: %d after %d", all[i].Seq, all[i-1].Seq)
		}
	}
}

// A call spanning sessions where one session's requests fail (its first
// transcript's id is another session's) reports that failure on those
// requests alone: the other sessions' requests, before and after it, are
// committed and reported so, and the call itself does not fail (a call
// error would mean nothing was admitted).
func testAdmitBatchOneSessionFails(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	if _, err := s.Compress(ctxOf(t), "s1", "taken", at(time.Second)); err != nil {
		t.Fatalf("compress: %v", err)
	}
	req := func(session, text string) backend.AdmitRequest {
		return backend.AdmitRequest{Session: session, Kind: backend.KindHuman, Principal: Owner,
			Payload: Payload(text), CreateSession: true, Now: at(2 * time.Second)}
	}
	res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{
		req("new-1", "one"), req("taken", "two"), req("s1", "three"), req("new-1", "four"),
	})
	noErr(t, "admit spanning sessions", err)
	if len(res) != 4 {
		t.Fatalf("%d results for 4 requests", len(res))
	}
	wantErr(t, "admit creating a session whose first transcript id is taken", res[1].Err, backend.ErrConflict)
	for _, i := range []int{0, 2, 3} {
		noErr(t, fmt.Sprintf("request %d", i), res[i].Err)
		if res[i].Result != backend.ResultAdmitted {
			t.Errorf("request %d: result %q, want admitted", i, res[i].Result)
		}
	}
	if n := len(listAdmissions(t, s, "new-1", backend.AdmissionFilter{})); n != 2 {
		t.Errorf("new-1: %d admissions, want 2", n)
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 1 {
		t.Errorf("s1: %d admissions, want 1", n)
	}
	if _, err := s.GetSession(ctxOf(t), "taken", time.Time{}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("session taken: %v, want not found (never created)", err)
	}
}

// testAdmitResultIsStored: the admission an admit result carries is the
// one stored, field for field, for every shape of admission (human with
// and without a request id, automation with one identity, coalesced,
// pinned, a replay, composed parts, a partial re-offer, a time left to the
// store, <>& and U+2028 in a payload), admitted alone and together in one
// call, and so are the held admissions duplicates resolve to.
func testAdmitResultIsStored(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	noErr(t, "grant", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleWriter, Producers: []string{Producer}}))
	shapes := func(round string) []backend.AdmitRequest {
		h := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("hi <b> & \u2028 " + round), Now: at(time.Second)}
		hr := h
		hr.RequestID, hr.Principal = "r-"+round, Other
		one := autoReq("s1", "one "+round, "one-"+round)
		two := autoReq("s1", "two "+round, "two-a-"+round, "two-b-"+round)
		two.Principal = Other
		pinned := autoReq("s1", "pinned "+round, "pin-"+round)
		pinned.PinnedTarget = "elsewhere"
		replay := autoReq("s1", "replay "+round, "replay-"+round)
		replay.ReplayOf = "0123456789abcdef0123456789abcdef"
		parts := partsReq("s1", []string{"pa-" + round, "pb-" + round}, []string{"part a", "part b"})
		partial := partsReq("s1", []string{"one-" + round, "pc-" + round}, []string{"one " + round, "part c"})
		unset := autoReq("s1", "no time "+round, "unset-"+round)
		unset.Now = time.Time{}
		return []backend.AdmitRequest{h, hr, one, two, pinned, replay, parts, partial, unset}
	}
	check := func(what string, res []backend.AdmitResult) {
		t.Helper()
		for i, r := range res {
			noErr(t, fmt.Sprintf("%s: admit %d", what, i), r.Err)
			diff(t, fmt.Sprintf("%s: admission %d as stored", what, i), getAdmission(t, s, r.Admission.ID), r.Admission)
		}
	}
	// One at a time: the partial re-offer finds "one" held.
	for _, req := range shapes("alone") {
		check("alone", []backend.AdmitResult{admit1(t, s, req)})
	}
	// All in one call, then all again: every one a duplicate.
	for _, what := range []string{"together", "again"} {
		res, err := s.Admit(ctxOf(t), shapes("together"))
		noErr(t, what, err)
		check(what, res)
	}
}
