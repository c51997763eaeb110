package backendtest

import (
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var admissionsAdmitEdgeTests = []suiteTest{
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/ConflictNamesRequestAndAdmission", fn: testConflictMessage},
	{name: "Edges/AdmitMalformed", fn: testAdmitMalformed},
	{name: "Edges/AdmissionIDs", fn: testAdmissionIDs},
}

// A request id conflict names the request id and the admission holding it,
// so an operator can find it (`hermesq show ADM`).
func testConflictMessage(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	req := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "req-7", Payload: Payload("once")}
	first := admit1(t, s, req)
	noErr(t, "admit", first.Err)
	req.Payload = Payload("other")
	res := admit1(t, s, req)
	wantErr(t, "same request id, other payload", res.Err, backend.ErrConflict)
	for _, want := range []string{"req-7", first.Admission.ID, "s1"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("conflict %q does not name %q", res.Err, want)
		}
	}
}

// A malformed request (backend.CheckAdmitRequest) is refused with its own
// ErrInvalid, stores nothing, and leaves the other requests of the call
// alone: a NUL would split an identity or a request key, an empty principal
// would create a session nobody owns.
func testAdmitMalformed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	human := func(mod func(r *backend.AdmitRequest)) backend.AdmitRequest {
		r := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("x"), Now: T0}
		mod(&r)
		return r
	}
	automation := func(mod func(r *backend.AdmitRequest)) backend.AdmitRequest {
		r := autoReq("s1", "x", "ok-identity")
		mod(&r)
		return r
	}
	bad := map[string]backend.AdmitRequest{
		"empty principal":            human(func(r *backend.AdmitRequest) { r.Principal = "" }),
		"new session, no principal":  human(func(r *backend.AdmitRequest) { r.Session, r.Principal, r.CreateSession = "fresh", "", true }),
		"bad session id":             human(func(r *backend.AdmitRequest) { r.Session, r.CreateSession = "bad id", true }),
		"empty payload":              human(func(r *backend.AdmitRequest) { r.Payload = nil }),
		"request id with NUL":        human(func(r *backend.AdmitRequest) { r.RequestID = "a\x00b" }),
		"human with identities":      human(func(r *backend.AdmitRequest) { r.Identities = []string{"h-1"} }),
		"unknown kind":               human(func(r *backend.AdmitRequest) { r.Kind = "robot" }),
		"identity with NUL":          automation(func(r *backend.AdmitRequest) { r.Identities = []string{"a\x00b"} }),
		"empty identity":             automation(func(r *backend.AdmitRequest) { r.Identities = []string{"ok-2", ""} }),
		"no identities":              automation(func(r *backend.AdmitRequest) { r.Identities = nil }),
		"automation with request id": automation(func(r *backend.AdmitRequest) { r.RequestID = "r1" }),
		"bad pinned target":          automation(func(r *backend.AdmitRequest) { r.PinnedTarget = "bad target" }),
	}
	for what, req := range bad {
		good := autoReq("s1", "good", "good-"+what)
		res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{req, good})
		noErr(t, what+": the call", err)
		wantErr(t, what, res[0].Err, backend.ErrInvalid)
		noErr(t, what+": the good request beside it", res[1].Err)
	}
	as := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(as) != len(bad) {
		t.Errorf("%d admissions, want only the %d good ones", len(as), len(bad))
	}
	for _, a := range as {
		if !strings.HasPrefix(a.Text(), "good") {
			t.Errorf("a malformed request was stored: %+v", a)
		}
	}
	for _, id := range []string{"fresh", "bad id"} {
		if _, err := s.GetSession(ctxOf(t), id, time.Time{}); err == nil {
			t.Errorf("a malformed request created session %q", id)
		}
	}
	for _, ident := range []string{"a", "b", "a\x00b", "h-1", "ok-identity"} {
		if a, err := s.FindIdentity(ctxOf(t), "s1", ident); err == nil {
			t.Errorf("a malformed request holds identity %q: %+v", ident, a)
		}
	}
}

// An admission id names one admission in the whole store. A request re-sent
// with its id (its reply was lost) finds its admission as a duplicate; any
// other request with a taken id is ErrConflict naming the id, and writes
// nothing. A claim names an admission of its own session, else ErrNotFound.
func testAdmissionIDs(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	const id = "00112233445566778899aabbccddeeff"
	req := autoReq("s1", "once", "e1", "e2")
	req.ID = id
	first := admit1(t, s, req)
	noErr(t, "admit with an id", first.Err)
	if first.Admission.ID != id {
		t.Fatalf("admission id %q, want %q", first.Admission.ID, id)
	}
	again := admit1(t, s, req)
	noErr(t, "the same request re-sent", again.Err)
	if again.Result != backend.ResultDuplicate || again.Admission.ID != id {
		t.Errorf("the same request re-sent: %s %s, want a duplicate of %s", again.Result, again.Admission.ID, id)
	}
	diff(t, "re-sent identities", map[string]string{"e1": backend.ResultDuplicate, "e2": backend.ResultDuplicate}, again.Identities)
	diff(t, "re-sent admission", first.Admission, again.Admission)

	other := autoReq("s1", "another payload", "e3")
	other.ID = id
	elsewhere := req
	elsewhere.Session = "s2"
	elsewhere.Identities = []string{"e4"}
	for what, r := range map[string]backend.AdmitRequest{"another request": other, "a request to another session": elsewhere} {
		res := admit1(t, s, r)
		wantErr(t, "admission id taken, by "+what, res.Err, backend.ErrConflict)
		if !strings.Contains(res.Err.Error(), id) {
			t.Errorf("%s: conflict %q does not name the id", what, res.Err)
		}
	}
	if n := len(listAdmissions(t, s, "s2", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("a refused id wrote %d admissions to s2", n)
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 1 {
		t.Errorf("s1 has %d admissions, want 1", n)
	}
	if a := getAdmission(t, s, id); a.Session != "s1" || a.Text() != "once" {
		t.Errorf("admission %s after refused reuses: %+v", id, a)
	}
	for _, ident := range []string{"e3", "e4"} {
		if _, err := s.FindIdentity(ctxOf(t), "", ident); err == nil {
			t.Errorf("a refused request holds identity %s", ident)
		}
	}

	l1 := acquire(t, s, "s1", "A", T0)
	l2 := acquire(t, s, "s2", "A", T0)
	_, err := s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: "no-such-admission", Epoch: l1.Epoch, Mode: backend.ModeTurn, Now: T0})
	wantErr(t, "claim an unknown admission", err, backend.ErrNotFound)
	_, err = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s2", AdmissionID: id, Epoch: l2.Epoch, Mode: backend.ModeTurn, Now: T0})
	wantErr(t, "claim another session's admission", err, backend.ErrNotFound)
	if a := getAdmission(t, s, id); a.Status != backend.StatusQueued {
		t.Errorf("refused claims moved the admission to %s", a.Status)
	}
}
