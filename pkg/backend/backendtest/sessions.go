package backendtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var sessionTests = []suiteTest{
	{name: "OpenSession/Created", fn: testOpenSessionCreated},
	{name: "OpenSession/Existing", fn: testOpenSessionExisting},
	{name: "OpenSession/TranscriptCollision", fn: testOpenSessionTranscriptCollision},
	{name: "GetSession/NotFound", fn: testGetSessionNotFound},
	{name: "GetSession/CountersAndState", fn: testGetSessionCounters},
	{name: "ListSessions", fn: testListSessions},
	{name: "Grant", fn: testGrant},
	{name: "Admins", fn: testAdmins},
	{name: "Viewers", fn: testViewers},
	{name: "Viewers/Expiry", fn: testViewerExpiry},
	{name: "Subscribe", fn: testSubscribe},
	{name: "CanceledWrite", fn: testCanceledWrite},
}

// A write whose context has ended is refused as unavailable, and its error
// also says why (errors.Is context.Canceled), on every store: a drain
// stopped by its caller tells that stop from a store that is down.
func testCanceledWrite(t *testing.T, s backend.Store) {
	ctx, cancel := contextWithCancel(t)
	cancel()
	_, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: Owner, Now: T0})
	wantErr(t, "open a session under an ended context", err, backend.ErrUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("open a session under an ended context: %v, want it to wrap context.Canceled", err)
	}
	if _, err := s.GetSession(ctxOf(t), "s1", T0); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("after the refused open: %v, want the session not found", err)
	}
}

func testOpenSessionCreated(t *testing.T, s backend.Store) {
	sess := openSession(t, s, "s1")
	want := backend.Session{ID: "s1", Owner: Owner, CurrentTranscript: "s1", CreatedAt: T0}
	got := sess
	got.NextSeq = 0 // the first seq is the store's choice
	diff(t, "created session", want, got)
	diff(t, "GetSession after create", sess, getSession(t, s, "s1"))
	if st := sess.State(); st != backend.StateIdle {
		t.Errorf("new session state %q, want idle", st)
	}
	tr := getTranscript(t, s, "s1")
	diff(t, "first transcript", backend.Transcript{ID: "s1", Session: "s1", CreatedAt: T0}, tr)
}

func testOpenSessionExisting(t *testing.T, s backend.Store) {
	first := openSession(t, s, "s1")
	again, created, err := s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: "s1", Owner: Other, Now: at(time.Hour)})
	noErr(t, "open existing session", err)
	if created {
		t.Errorf("open existing session: created true")
	}
	diff(t, "existing session unchanged", first, again)
}

func testOpenSessionTranscriptCollision(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	_, err := s.Switch(ctxOf(t), "s1", "t-shared", T0)
	noErr(t, "switch to a new transcript", err)
	_, _, err = s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: "t-shared", Owner: Owner, Now: T0})
	wantErr(t, "open session named like another session's transcript", err, backend.ErrConflict)
	_, err = s.GetSession(ctxOf(t), "t-shared", time.Time{})
	wantErr(t, "session after refused open", err, backend.ErrNotFound)
}

func testGetSessionNotFound(t *testing.T, s backend.Store) {
	_, err := s.GetSession(ctxOf(t), "nope", time.Time{})
	wantErr(t, "get unknown session", err, backend.ErrNotFound)
}

func testGetSessionCounters(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a1 := human(t, s, "s1", "one")
	a2 := human(t, s, "s1", "two")
	human(t, s, "s1", "three")
	sess := getSession(t, s, "s1")
	if sess.Queued != 3 || sess.Running != 0 || sess.Unknown != 0 || sess.State() != backend.StateIdle {
		t.Fatalf("3 queued: got queued %d running %d unknown %d state %s", sess.Queued, sess.Running, sess.Unknown, sess.State())
	}
	l := acquire(t, s, "s1", "d1", T0)
	c1 := claim(t, s, l, a1.ID, T0)
	sess = getSession(t, s, "s1")
	if sess.Queued != 2 || sess.Running != 1 || sess.State() != backend.StateRunning {
		t.Fatalf("one running: got queued %d running %d state %s", sess.Queued, sess.Running, sess.State())
	}
	if sess.Epoch != l.Epoch || sess.Generation != c1.Generation || sess.LeaseHolder != "d1" || !sess.LeaseExpiresAt.Equal(l.ExpiresAt) {
		t.Errorf("session lease fields: epoch %d gen %d holder %q expires %v; want %d %d d1 %v",
			sess.Epoch, sess.Generation, sess.LeaseHolder, sess.LeaseExpiresAt, l.Epoch, c1.Generation, l.ExpiresAt)
	}
	settleTurn(t, s, c1, "r1", at(time.Second))
	claim(t, s, l, a2.ID, at(2*time.Second))
	acquire(t, s, "s1", "d2", at(time.Hour)) // a2 becomes unknown
	sess = getSession(t, s, "s1")
	if sess.Queued != 1 || sess.Running != 0 || sess.Unknown != 1 || sess.State() != backend.StatePaused {
		t.Fatalf("one unknown: got queued %d running %d unknown %d state %s", sess.Queued, sess.Running, sess.Unknown, sess.State())
	}
	_, err := s.Resolve(ctxOf(t), a2.ID, backend.ResolveInterrupted, at(time.Hour))
	noErr(t, "resolve", err)
	as := listAdmissions(t, s, "s1", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}})
	_, err = s.Cancel(ctxOf(t), as[0].ID, at(time.Hour))
	noErr(t, "cancel", err)
	sess = getSession(t, s, "s1")
	if sess.Queued != 0 || sess.Unknown != 0 || sess.State() != backend.StateIdle {
		t.Fatalf("all done: got queued %d unknown %d state %s", sess.Queued, sess.Unknown, sess.State())
	}
	_, err = s.CloseSession(ctxOf(t), "s1", "cli_close", at(time.Hour))
	noErr(t, "close", err)
	sess = getSession(t, s, "s1")
	if !sess.Closed || sess.State() != backend.StateClosed {
		t.Fatalf("closed session: closed %v state %s", sess.Closed, sess.State())
	}
}

func testListSessions(t *testing.T, s backend.Store) {
	got, err := s.ListSessions(ctxOf(t), time.Time{})
	noErr(t, "list sessions of an empty store", err)
	if len(got) != 0 {
		t.Fatalf("empty store lists %d sessions", len(got))
	}
	for _, id := range []string{"b", "c/2", "a", "c"} {
		openSession(t, s, id)
	}
	human(t, s, "b", "x")
	got, err = s.ListSessions(ctxOf(t), time.Time{})
	noErr(t, "list sessions", err)
	var ids []string
	for _, sess := range got {
		ids = append(ids, sess.ID)
		diff(t, "listed session "+sess.ID, getSession(t, s, sess.ID), sess)
	}
	diff(t, "session ids in order", []string{"a", "b", "c", "c/2"}, ids)
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

func testViewers(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	now := time.Now()
	v1, err := s.AddViewer(ctxOf(t), "s1", time.Hour, now)
	noErr(t, "add viewer", err)
	if v1.ID == "" || v1.Session != "s1" || v1.ExpiresAt.Before(now.Add(time.Hour-time.Second)) {
		t.Errorf("viewer %+v: want an id, session s1, expiry about now+1h", v1)
	}
	v2, err := s.AddViewer(ctxOf(t), "s1", time.Hour, now)
	noErr(t, "add second viewer", err)
	if v1.ID == v2.ID {
		t.Fatalf("two viewers share id %s", v1.ID)
	}
	if n := getSession(t, s, "s1").Viewers; n != 2 {
		t.Fatalf("viewers %d, want 2", n)
	}
	r, err := s.RenewViewer(ctxOf(t), "s1", v1.ID, 2*time.Hour, now)
	noErr(t, "renew viewer", err)
	if !r.ExpiresAt.After(v1.ExpiresAt) {
		t.Errorf("renewed expiry %v not after %v", r.ExpiresAt, v1.ExpiresAt)
	}
	noErr(t, "remove viewer", s.RemoveViewer(ctxOf(t), "s1", v2.ID))
	if n := getSession(t, s, "s1").Viewers; n != 1 {
		t.Fatalf("viewers after remove %d, want 1", n)
	}
	_, err = s.RenewViewer(ctxOf(t), "s1", v2.ID, time.Hour, now)
	wantErr(t, "renew a removed viewer", err, backend.ErrNotFound)
	_, err = s.AddViewer(ctxOf(t), "nope", time.Hour, now)
	wantErr(t, "add viewer to unknown session", err, backend.ErrNotFound)
}

func testViewerExpiry(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	v, err := s.AddViewer(ctxOf(t), "s1", time.Minute, T0)
	noErr(t, "add viewer", err)
	_, err = s.AddViewer(ctxOf(t), "s1", time.Hour, T0)
	noErr(t, "add long viewer", err)
	// Viewer expiry is measured at the read's now.
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{30 * time.Second, 2}, {2 * time.Minute, 1}, {2 * time.Hour, 0}} {
		sess, err := s.GetSession(ctxOf(t), "s1", at(c.at))
		noErr(t, "get session", err)
		if sess.Viewers != c.want {
			t.Errorf("GetSession at T0+%v: %d viewers, want %d", c.at, sess.Viewers, c.want)
		}
		all, err := s.ListSessions(ctxOf(t), at(c.at))
		noErr(t, "list sessions", err)
		if len(all) != 1 || all[0].Viewers != c.want {
			t.Errorf("ListSessions at T0+%v: %+v, want s1 with %d viewers", c.at, all, c.want)
		}
	}
	_, err = s.RenewViewer(ctxOf(t), "s1", v.ID, time.Hour, at(2*time.Minute))
	wantErr(t, "renew an expired viewer", err, backend.ErrNotFound)
}

func testSubscribe(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	ctx, cancel := contextWithCancel(t)
	ch, err := s.Subscribe(ctx)
	noErr(t, "subscribe", err)
	human(t, s, "s2", "wake up")
	waitFor(t, ch, "s2")
	_, err = s.AddViewer(ctxOf(t), "s1", time.Hour, time.Now())
	noErr(t, "add viewer", err)
	waitFor(t, ch, "s1")
	cancel()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("subscription channel still open 20s after its context ended")
		}
	}
}

// waitFor reads ch until it reports session, failing after 20 s.
func waitFor(t *testing.T, ch <-chan string, session string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case id, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed before reporting %s", session)
			}
			if id == session {
				return
			}
		case <-deadline:
			t.Fatalf("no change of session %s reported within 20s", session)
		}
	}
}
