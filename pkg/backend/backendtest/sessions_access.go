package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var sessionsAccessTests = []suiteTest{
	{name: "Grant", fn: testGrant},
	{name: "Admins", fn: testAdmins},
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/InvalidOwnerAndPrincipal", fn: testInvalidOwnerAndPrincipal},
	{name: "Edges/GrantsAreASet", fn: testGrantsAreASet},
}

func testGrant(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	res := admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Other, Payload: Payload("hi")})
	wantErr(t, "human admit by a non-owner", res.Err, backend.ErrForbidden)
	areq := autoReq("s1", "done", "id-1")
	areq.Principal = Other
	res = admit1(t, s, areq)
	wantErr(t, "automation admit by a non-owner", res.Err, backend.ErrForbidden)
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 0 {
		t.Fatalf("forbidden admits left %d admissions", n)
	}
	if _, err := s.FindIdentity(ctxOf(t), "s1", "id-1"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("forbidden automation admit holds its identity: %v", err)
	}
	human := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Other, Payload: Payload("hi")}
	grant := func(g backend.Grant) {
		t.Helper()
		g.Principal = Other
		noErr(t, "grant "+string(g.Role), s.Grant(ctxOf(t), "s1", g))
		diff(t, "grants after granting "+string(g.Role), []backend.Grant{g}, getSession(t, s, "s1").Grants)
	}

	// A reader admits nothing.
	grant(backend.Grant{Role: backend.RoleReader})
	wantErr(t, "human admit by a reader", admit1(t, s, human).Err, backend.ErrForbidden)
	wantErr(t, "automation admit by a reader", admit1(t, s, areq).Err, backend.ErrForbidden)

	// A writer admits human input, and automation only of the producers
	// its grant names; granting again replaces the grant.
	grant(backend.Grant{Role: backend.RoleWriter})
	noErr(t, "grant twice", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleWriter}))
	res = admit1(t, s, human)
	noErr(t, "human admit by a writer", res.Err)
	if res.Admission.Principal != Other {
		t.Errorf("admission principal %q, want %q", res.Admission.Principal, Other)
	}
	wantErr(t, "automation admit by a writer of no producer", admit1(t, s, areq).Err, backend.ErrForbidden)
	grant(backend.Grant{Role: backend.RoleWriter, Producers: []string{"watch"}})
	wantErr(t, "automation admit by a writer of another producer", admit1(t, s, areq).Err, backend.ErrForbidden)
	grant(backend.Grant{Role: backend.RoleWriter, Producers: []string{Producer}})
	noErr(t, "automation admit by a writer of its producer", admit1(t, s, areq).Err)

	// An owner grant admits every producer's automation.
	grant(backend.Grant{Role: backend.RoleOwner})
	watch := autoReq("s1", "watch done", "id-2")
	watch.Principal, watch.Producer = Other, "watch"
	noErr(t, "automation admit by an owner grant", admit1(t, s, watch).Err)

	// Revoke ends it.
	noErr(t, "revoke", s.Revoke(ctxOf(t), "s1", Other))
	if g := getSession(t, s, "s1").Grants; len(g) != 0 {
		t.Errorf("grants after revoke: %v", g)
	}
	wantErr(t, "human admit after revoke", admit1(t, s, human).Err, backend.ErrForbidden)
	wantErr(t, "revoke again", s.Revoke(ctxOf(t), "s1", Other), backend.ErrNotFound)
	wantErr(t, "revoke on unknown session", s.Revoke(ctxOf(t), "nope", Other), backend.ErrNotFound)
	wantErr(t, "grant on unknown session", s.Grant(ctxOf(t), "nope", backend.Grant{Principal: Other, Role: backend.RoleWriter}), backend.ErrNotFound)
}

// The store-wide admin right: granted, listed sorted, revoked; revoking a
// principal without it is ErrNotFound. Caller answers.
func testAdmins(t *testing.T, s backend.Store) {
	got, err := s.Admins(ctxOf(t))
	noErr(t, "admins of a new store", err)
	diff(t, "admins of a new store", []string{}, got)
	noErr(t, "set admin zed", s.SetAdmin(ctxOf(t), "zed", true))
	noErr(t, "set admin bob", s.SetAdmin(ctxOf(t), "bob", true))
	noErr(t, "set admin bob again", s.SetAdmin(ctxOf(t), "bob", true))
	got, err = s.Admins(ctxOf(t))
	noErr(t, "admins", err)
	diff(t, "admins", []string{"bob", "zed"}, got)
	noErr(t, "revoke admin zed", s.SetAdmin(ctxOf(t), "zed", false))
	wantErr(t, "revoke admin zed again", s.SetAdmin(ctxOf(t), "zed", false), backend.ErrNotFound)
	wantErr(t, "set admin of an empty principal", s.SetAdmin(ctxOf(t), "", true), backend.ErrInvalid)
	// One principal check (backend.ValidatePrincipal), as session grant
	// applies: no control or bidirectional formatting character.
	for _, bad := range []string{"\x1b]0;pwned\a\x1b[2J", "bob\nmallory", "bo\u202eb", " "} {
		wantErr(t, fmt.Sprintf("set admin %q", bad), s.SetAdmin(ctxOf(t), bad, true), backend.ErrInvalid)
		wantErr(t, fmt.Sprintf("grant to %q", bad), s.Grant(ctxOf(t), "nosuch", backend.Grant{Principal: bad, Role: backend.RoleReader}), backend.ErrInvalid)
		// Revoking one that no store could hold before is not found, not invalid.
		wantErr(t, fmt.Sprintf("revoke admin %q", bad), s.SetAdmin(ctxOf(t), bad, false), backend.ErrNotFound)
	}
	got, err = s.Admins(ctxOf(t))
	noErr(t, "admins", err)
	diff(t, "admins after revoke", []string{"bob"}, got)
	if _, err := s.Caller(ctxOf(t)); err != nil {
		t.Errorf("caller: %v", err)
	}
}

// An empty owner or principal is malformed (ValidateToken), never stored.
func testInvalidOwnerAndPrincipal(t *testing.T, s backend.Store) {
	_, _, err := s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: "s1", Owner: "", Now: T0})
	wantErr(t, "open a session without owner", err, backend.ErrInvalid)
	_, err = s.GetSession(ctxOf(t), "s1", time.Time{})
	wantErr(t, "session after a refused open", err, backend.ErrNotFound)
	_, _, err = s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: "bad id", Owner: Owner, Now: T0})
	wantErr(t, "open a session with a bad id", err, backend.ErrInvalid)
	openSession(t, s, "s1")
	wantErr(t, "grant to an empty principal", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: "", Role: backend.RoleWriter}), backend.ErrInvalid)
	wantErr(t, "grant to a principal with NUL", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: "a\x00b", Role: backend.RoleWriter}), backend.ErrInvalid)
	wantErr(t, "grant without a role", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other}), backend.ErrInvalid)
	wantErr(t, "grant of an unknown role", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: "admin"}), backend.ErrInvalid)
	wantErr(t, "grant of producers to a reader", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleReader, Producers: []string{Producer}}), backend.ErrInvalid)
	wantErr(t, "grant of a bad producer name", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Other, Role: backend.RoleWriter, Producers: []string{"Bad Name"}}), backend.ErrInvalid)
	wantErr(t, "grant to the owner", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: Owner, Role: backend.RoleReader}), backend.ErrInvalid)
	if g := getSession(t, s, "s1").Grants; len(g) != 0 {
		t.Errorf("refused grants left %q", g)
	}
}

// Grants are a set: listed sorted whatever order they were given in, and an
// import of the same session with its grants in another order is a no-op
// (an export of one store imports into another and back).
func testGrantsAreASet(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	for _, g := range []backend.Grant{
		{Principal: "zed", Role: backend.RoleOwner},
		{Principal: "bob", Role: backend.RoleWriter, Producers: []string{"watch", Producer}},
		{Principal: "mia", Role: backend.RoleReader},
	} {
		noErr(t, "grant "+g.Principal, s.Grant(ctxOf(t), "s1", g))
	}
	want := []backend.Grant{
		{Principal: "bob", Role: backend.RoleWriter, Producers: []string{Producer, "watch"}},
		{Principal: "mia", Role: backend.RoleReader},
		{Principal: "zed", Role: backend.RoleOwner},
	}
	diff(t, "grants of GetSession", want, getSession(t, s, "s1").Grants)
	var rec *backend.SessionRecord
	for _, r := range export(t, s) {
		if r.Session != nil {
			rec = r.Session
		}
	}
	if rec == nil {
		t.Fatal("export has no session")
	}
	diff(t, "exported grants", want, rec.Grants)
	shuffled := *rec
	shuffled.Grants = []backend.Grant{want[2], want[0], want[1]}
	shuffled.Grants[1].Producers = []string{"watch", Producer}
	noErr(t, "import the session with its grants in another order", importErr(t, s, []backend.Record{{Session: &shuffled}}))
	shuffled.Grants = []backend.Grant{want[2], want[0]}
	wantErr(t, "import the session with a grant less", importErr(t, s, []backend.Record{{Session: &shuffled}}), backend.ErrConflict)
	shuffled.Grants = []backend.Grant{want[0], want[1], {Principal: "zed", Role: backend.RoleReader}}
	wantErr(t, "import the session with a grant of another role", importErr(t, s, []backend.Record{{Session: &shuffled}}), backend.ErrConflict)
}
