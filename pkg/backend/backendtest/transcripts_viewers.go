package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var transcriptsViewersTests = []suiteTest{
	{name: "Viewers", fn: testViewers},
	{name: "Viewers/Expiry", fn: testViewerExpiry},
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/RemoveViewerUnknown", fn: testRemoveViewerUnknown},
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

// Removing a viewer that is not there (never was, already removed, or
// expired) is ErrNotFound, as renewing one is; the session must exist.
func testRemoveViewerUnknown(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	err := s.RemoveViewer(ctxOf(t), "s1", "no-such-viewer")
	wantErr(t, "remove an unknown viewer", err, backend.ErrNotFound)
	v, err := s.AddViewer(ctxOf(t), "s1", time.Hour, time.Now())
	noErr(t, "add viewer", err)
	noErr(t, "remove viewer", s.RemoveViewer(ctxOf(t), "s1", v.ID))
	wantErr(t, "remove a viewer twice", s.RemoveViewer(ctxOf(t), "s1", v.ID), backend.ErrNotFound)
	gone, err := s.AddViewer(ctxOf(t), "s1", time.Second, time.Now().Add(-time.Hour))
	noErr(t, "add a viewer already expired", err)
	wantErr(t, "remove an expired viewer", s.RemoveViewer(ctxOf(t), "s1", gone.ID), backend.ErrNotFound)
	wantErr(t, "remove a viewer of an unknown session", s.RemoveViewer(ctxOf(t), "ghost", v.ID), backend.ErrNotFound)
}
