package backendtest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Cases the differential test of the stores (internal/storediff) found
// the stores answering differently; each holds both to one answer.
var divergenceTests = []suiteTest{
	{name: "Divergence/CompactUnknownSessionEarlyCutoff", fn: testCompactUnknownSessionEarlyCutoff},
	{name: "Divergence/OpenSessionViewersAtNow", fn: testOpenSessionViewersAtNow},
	{name: "Divergence/SettleOtherSessionsAdmission", fn: testSettleOtherSessionsAdmission},
	{name: "Divergence/MovedBeforeWatched", fn: testMovedBeforeWatched},
	{name: "Divergence/AdmitUncreatableSession", fn: testAdmitUncreatableSession},
}

// Compact of an unknown session is ErrNotFound whatever the cutoff, the
// zero time and one before the first nanosecond an int64 holds included
// (Redis answered an empty result for those without looking).
func testCompactUnknownSessionEarlyCutoff(t *testing.T, s backend.Store) {
	for _, before := range []time.Time{{}, time.Unix(0, math.MinInt64).Add(-time.Second), time.Unix(0, -1), at(time.Hour)} {
		_, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "nope", Before: before})
		wantErr(t, "compact of an unknown session before "+before.String(), err, backend.ErrNotFound)
	}
}

// OpenSession of an existing session counts its viewers live at the
// request's Now, as GetSession does at its now (Redis counted them at the
// wall clock).
func testOpenSessionViewersAtNow(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	_, err := s.AddViewer(ctxOf(t), "s1", 10*time.Second, at(time.Second))
	noErr(t, "add viewer", err)
	for _, c := range []struct {
		now  time.Time
		want int
	}{{at(5 * time.Second), 1}, {at(time.Hour), 0}} {
		sess, created, err := s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: "s1", Owner: Owner, Now: c.now})
		noErr(t, "open existing", err)
		if created || sess.Viewers != c.want {
			t.Errorf("open existing at %s: created %v, viewers %d, want %d", c.now, created, sess.Viewers, c.want)
		}
	}
}

// A settle or requeue naming an admission of another session is
// ErrNotFound, whatever the fence (bbolt answered ErrFenced when the epoch
// and generation happened to match).
func testSettleOtherSessionsAdmission(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	other := human(t, s, "s2", "elsewhere")
	for _, gen := range []uint64{0, 1} {
		req := backend.SettleRequest{Session: "s1", AdmissionID: other.ID, Generation: gen, Outcome: backend.OutcomeCompleted,
			Messages: turnMessages("s1", "elsewhere", "answer"), Now: at(time.Second)}
		_, err := s.Settle(ctxOf(t), req)
		wantErr(t, "settle of another session's admission", err, backend.ErrNotFound)
		_, err = s.Requeue(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: other.ID, Generation: gen, Now: at(time.Second)})
		wantErr(t, "requeue of another session's admission", err, backend.ErrNotFound)
	}
}

// A direct settle that is both unwatched with a live viewer and decided on
// a transcript that is no longer current is ErrMoved (the drainer decides
// again, and then sees the viewer), whether sent alone or in a run.
func testMovedBeforeWatched(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	n := auto(t, s, "s1", "a note", "n1").Admission
	l := acquire(t, s, "s1", "A", T0)
	// A long viewer: the store may count viewers by its own clock.
	_, err := s.AddViewer(ctxOf(t), "s1", 1000*24*time.Hour, time.Now())
	noErr(t, "add viewer", err)
	req := backend.SettleRequest{Session: "s1", AdmissionID: n.ID, Epoch: l.Epoch, Direct: true, Unwatched: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", n)}, ExpectCurrent: "t1", Now: at(time.Second)}
	_, err = s.Settle(ctxOf(t), req)
	wantErr(t, "unwatched settle decided on another transcript", err, backend.ErrMoved)
	_, err = s.SettleRun(ctxOf(t), []backend.SettleRequest{req})
	wantErr(t, "unwatched run decided on another transcript", err, backend.ErrMoved)
	req.ExpectCurrent = "s1"
	_, err = s.Settle(ctxOf(t), req)
	wantErr(t, "unwatched settle with a viewer", err, backend.ErrWatched)
}

// A batch offering to a session whose id is a transcript of another
// session: the request that would create it is a conflict, the others
// find no session, each its own result (Redis gave every request of the
// session the conflict).
func testAdmitUncreatableSession(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	_, err := s.Switch(ctxOf(t), "s1", "s2", at(time.Second))
	noErr(t, "switch to s2", err)
	res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{
		autoReq("s2", "event", "e1"),
		{Session: "s2", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("hi"), CreateSession: true, Now: at(2 * time.Second)},
		{Session: "s2", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("hi again"), Now: at(2 * time.Second)},
	})
	noErr(t, "admit", err)
	for i, want := range []error{backend.ErrNotFound, backend.ErrConflict, backend.ErrNotFound} {
		wantErr(t, fmt.Sprintf("request %d to s2", i), res[i].Err, want)
	}
}
