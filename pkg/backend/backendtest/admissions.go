package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// testAdmissions runs the cases of backend.Admissions: the admit step
// (admissions_admit.go, admissions_admit_edges.go), parts
// (admissions_parts.go), and reads, resolve and cancel (here).
func testAdmissions(t *testing.T, newStore func(t *testing.T) backend.Store) {
	runCases(t, newStore, admissionsAdmitTests, admissionsAdmitEdgeTests, admissionsPartsTests, admissionsTests)
}

var admissionsTests = []suiteTest{
	{name: "GetAdmission/NotFound", fn: testGetAdmissionNotFound},
	{name: "ListAdmissions/Filters", fn: testListAdmissions},
	{name: "FindIdentity", fn: testFindIdentity},
	{name: "Resolve", fn: testResolve},
	{name: "Cancel", fn: testCancel},
}

func testGetAdmissionNotFound(t *testing.T, s backend.Store) {
	_, err := s.GetAdmission(ctxOf(t), "ffffffffffffffffffffffffffffffff")
	wantErr(t, "get unknown admission", err, backend.ErrNotFound)
}

func testListAdmissions(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	var ids []string
	for i := 0; i < 6; i++ {
		ids = append(ids, human(t, s, "s1", fmt.Sprint("m", i)).ID)
	}
	l := acquire(t, s, "s1", "d", T0)
	c := claim(t, s, l, ids[0], T0)
	settleTurn(t, s, c, "r", T0) // 0 done/completed
	c = claim(t, s, l, ids[1], T0)
	_, err := s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: c.ID, Epoch: c.Epoch, Generation: c.Generation, Outcome: backend.OutcomeFailed, Error: "exit 1", Now: T0})
	noErr(t, "settle failed", err) // 1 done/failed
	_, err = s.Cancel(ctxOf(t), ids[3], T0)
	noErr(t, "cancel", err)    // 3 done/cancelled
	claim(t, s, l, ids[2], T0) // 2 running; 4, 5 queued

	seqOf := func(as []backend.Admission) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Text())
		}
		return out
	}
	cases := []struct {
		name string
		f    backend.AdmissionFilter
		want []string
	}{
		{"all", backend.AdmissionFilter{}, []string{"m0", "m1", "m2", "m3", "m4", "m5"}},
		{"queued", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}}, []string{"m4", "m5"}},
		{"queued limit 1", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}, Limit: 1}, []string{"m4"}},
		{"running", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusRunning}}, []string{"m2"}},
		{"done", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusDone}}, []string{"m0", "m1", "m3"}},
		{"queued or running", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusRunning, backend.StatusQueued}}, []string{"m2", "m4", "m5"}},
		{"failed or cancelled", backend.AdmissionFilter{Outcomes: []backend.Outcome{backend.OutcomeFailed, backend.OutcomeCancelled}}, []string{"m1", "m3"}},
		{"after seq of m2", backend.AdmissionFilter{AfterSeq: c.Seq + 1}, []string{"m3", "m4", "m5"}},
		{"limit 2", backend.AdmissionFilter{Limit: 2}, []string{"m0", "m1"}},
		{"done after m0, limit 1", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusDone}, AfterSeq: getAdmission(t, s, ids[0]).Seq, Limit: 1}, []string{"m1"}},
	}
	// "after seq of m2" uses m2's own seq.
	cases[7].f.AfterSeq = getAdmission(t, s, ids[2]).Seq
	for _, tc := range cases {
		diff(t, "filter "+tc.name, tc.want, seqOf(listAdmissions(t, s, "s1", tc.f)))
	}
	_, err = s.ListAdmissions(ctxOf(t), "ghost", backend.AdmissionFilter{})
	wantErr(t, "list admissions of unknown session", err, backend.ErrNotFound)
}

func testFindIdentity(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	a := auto(t, s, "s1", "x", "shared", "only-1").Admission
	b := auto(t, s, "s2", "y", "only-2").Admission
	got, err := s.FindIdentity(ctxOf(t), "s1", "only-1")
	noErr(t, "find in session", err)
	diff(t, "found in session", a, got)
	got, err = s.FindIdentity(ctxOf(t), "", "only-2")
	noErr(t, "find in any session", err)
	diff(t, "found in any session", b, got)
	_, err = s.FindIdentity(ctxOf(t), "s2", "only-1")
	wantErr(t, "identity of another session", err, backend.ErrNotFound)
	_, err = s.FindIdentity(ctxOf(t), "", "nobody")
	wantErr(t, "unknown identity", err, backend.ErrNotFound)
	if _, err := s.FindIdentity(ctxOf(t), "", "shared"); err != nil {
		t.Errorf("find shared in any session: %v", err)
	}
}

func testResolve(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	var ids []string
	for _, text := range []string{"a", "b", "c", "d"} {
		ids = append(ids, human(t, s, "s1", text).ID)
	}
	_, err := s.Resolve(ctxOf(t), ids[0], backend.ResolveCompleted, T0)
	wantErr(t, "resolve a queued admission", err, backend.ErrConflict)
	_, err = s.Resolve(ctxOf(t), "ffffffffffffffffffffffffffffffff", backend.ResolveCompleted, T0)
	wantErr(t, "resolve an unknown id", err, backend.ErrNotFound)

	// makeUnknown claims the head and loses the lease.
	var now time.Duration
	makeUnknown := func(id string) {
		t.Helper()
		now += time.Hour
		l := acquire(t, s, "s1", "A", at(now))
		claim(t, s, l, id, at(now))
		now += time.Hour
		acquire(t, s, "s1", "B", at(now))
		if got := getAdmission(t, s, id); got.Status != backend.StatusUnknown {
			t.Fatalf("%s: %s, want unknown", id, got.Status)
		}
	}
	makeUnknown(ids[0])
	r, err := s.Resolve(ctxOf(t), ids[0], backend.ResolveCompleted, at(now))
	noErr(t, "resolve completed", err)
	if r.Status != backend.StatusDone || r.Outcome != backend.OutcomeCompleted || !r.SettledAt.Equal(at(now)) {
		t.Errorf("resolved completed: %s %s %v", r.Status, r.Outcome, r.SettledAt)
	}
	_, err = s.Resolve(ctxOf(t), ids[0], backend.ResolveInterrupted, at(now))
	wantErr(t, "resolve a done admission", err, backend.ErrConflict)

	makeUnknown(ids[1])
	r, err = s.Resolve(ctxOf(t), ids[1], backend.ResolveInterrupted, at(now))
	noErr(t, "resolve interrupted", err)
	if r.Status != backend.StatusDone || r.Outcome != backend.OutcomeInterrupted {
		t.Errorf("resolved interrupted: %s %s", r.Status, r.Outcome)
	}

	makeUnknown(ids[2])
	r, err = s.Resolve(ctxOf(t), ids[2], backend.ResolveRequeue, at(now))
	noErr(t, "resolve requeue", err)
	if r.Status != backend.StatusQueued || r.Outcome != "" {
		t.Errorf("resolved requeue: %s %q", r.Status, r.Outcome)
	}
	head := listAdmissions(t, s, "s1", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}, Limit: 1})
	if len(head) != 1 || head[0].ID != ids[2] {
		t.Errorf("requeued admission is not back at the head")
	}
	sess := getSession(t, s, "s1")
	if sess.Unknown != 0 || sess.Queued != 2 || sess.State() != backend.StateIdle {
		t.Errorf("after resolves: unknown %d queued %d state %s", sess.Unknown, sess.Queued, sess.State())
	}
}

func testCancel(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "a")
	b := human(t, s, "s1", "b")
	c := human(t, s, "s1", "c")
	got, err := s.Cancel(ctxOf(t), b.ID, at(time.Second))
	noErr(t, "cancel", err)
	if got.Status != backend.StatusDone || got.Outcome != backend.OutcomeCancelled || !got.SettledAt.Equal(at(time.Second)) {
		t.Errorf("cancelled: %s %s %v", got.Status, got.Outcome, got.SettledAt)
	}
	_, err = s.Cancel(ctxOf(t), b.ID, at(time.Second))
	wantErr(t, "cancel a done admission", err, backend.ErrConflict)
	l := acquire(t, s, "s1", "A", T0)
	claim(t, s, l, a.ID, T0)
	_, err = s.Cancel(ctxOf(t), a.ID, T0)
	wantErr(t, "cancel a running admission", err, backend.ErrConflict)
	_, err = s.Cancel(ctxOf(t), "ffffffffffffffffffffffffffffffff", T0)
	wantErr(t, "cancel an unknown id", err, backend.ErrNotFound)
	if sess := getSession(t, s, "s1"); sess.Queued != 1 {
		t.Errorf("queued %d, want 1 (c)", sess.Queued)
	}
	_ = c
}
