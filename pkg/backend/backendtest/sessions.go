package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// testSessions runs the cases of backend.Sessions: sessions opened, read
// and listed (here); grants, admins and the caller (sessions_access.go).
func testSessions(t *testing.T, newStore func(t *testing.T) backend.Store) {
	runCases(t, newStore, sessionsTests, sessionsAccessTests)
}

var sessionsTests = []suiteTest{
	{name: "OpenSession/Created", fn: testOpenSessionCreated},
	{name: "OpenSession/Existing", fn: testOpenSessionExisting},
	{name: "OpenSession/TranscriptCollision", fn: testOpenSessionTranscriptCollision},
	{name: "GetSession/NotFound", fn: testGetSessionNotFound},
	{name: "GetSession/CountersAndState", fn: testGetSessionCounters},
	{name: "ListSessions", fn: testListSessions},
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
