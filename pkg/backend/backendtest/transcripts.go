package backendtest

import (
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// testTranscripts runs the cases of backend.Transcripts: close, compress
// and switch (here), and viewers (transcripts_viewers.go).
func testTranscripts(t *testing.T, newStore func(t *testing.T) backend.Store) {
	runCases(t, newStore, transcriptsTests, transcriptsViewersTests)
}

var transcriptsTests = []suiteTest{
	{name: "CloseSession/Reasons", fn: testCloseReasons},
	{name: "CloseSession/Busy", fn: testCloseBusy},
	{name: "Compress", fn: testCompress},
	{name: "Switch", fn: testSwitch},
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/CloseReasonInvalid", fn: testCloseReasonInvalid},
	{name: "Edges/CompressClosed", fn: testCompressClosed},
}

func testCloseReasons(t *testing.T, s backend.Store) {
	for i, reason := range backend.CloseReasons {
		id := "s-" + reason
		openSession(t, s, id)
		when := at(time.Duration(i+1) * time.Minute)
		tr, err := s.CloseSession(ctxOf(t), id, reason, when)
		noErr(t, "close with "+reason, err)
		want := backend.Transcript{ID: id, Session: id, EndedAt: when, EndReason: reason, CreatedAt: T0}
		diff(t, "closed transcript ("+reason+")", want, tr)
		diff(t, "closed transcript stored ("+reason+")", want, getTranscript(t, s, id))
		sess := getSession(t, s, id)
		if !sess.Closed || sess.State() != backend.StateClosed {
			t.Errorf("%s: closed %v state %s", reason, sess.Closed, sess.State())
		}
		_, err = s.CloseSession(ctxOf(t), id, reason, when)
		wantErr(t, "close a closed session", err, backend.ErrClosed)
	}
	_, err := s.CloseSession(ctxOf(t), "ghost", "cli_close", T0)
	wantErr(t, "close unknown session", err, backend.ErrNotFound)
}

func testCloseBusy(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	closeBusy := func(what string) {
		t.Helper()
		_, err := s.CloseSession(ctxOf(t), "s1", "cli_close", T0)
		wantErr(t, "close while "+what, err, backend.ErrBusy)
		if tr := getTranscript(t, s, "s1"); tr.Ended() {
			t.Fatalf("close while %s ended the transcript", what)
		}
	}
	a := human(t, s, "s1", "a")
	closeBusy("queued")
	l := acquire(t, s, "s1", "A", T0)
	claim(t, s, l, a.ID, T0)
	closeBusy("running")
	acquire(t, s, "s1", "B", at(time.Hour))
	closeBusy("unknown")
	_, err := s.Resolve(ctxOf(t), a.ID, backend.ResolveInterrupted, at(time.Hour))
	noErr(t, "resolve", err)
	_, err = s.CloseSession(ctxOf(t), "s1", "cli_close", at(time.Hour))
	noErr(t, "close when idle", err)
}

func testCompress(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	a := human(t, s, "s1", "q")
	l := acquire(t, s, "s1", "A", T0)
	settleTurn(t, s, claim(t, s, l, a.ID, T0), "r", T0)

	child, err := s.Compress(ctxOf(t), "s1", "s1.2", at(time.Minute))
	noErr(t, "compress", err)
	diff(t, "compress returns the child", backend.Transcript{ID: "s1.2", Session: "s1", Parent: "s1", CreatedAt: at(time.Minute)}, child)
	diff(t, "child stored", child, getTranscript(t, s, "s1.2"))
	parent := getTranscript(t, s, "s1")
	want := backend.Transcript{ID: "s1", Session: "s1", Child: "s1.2", EndedAt: at(time.Minute),
		EndReason: backend.ReasonCompression, MessageCount: 2, CreatedAt: T0}
	diff(t, "compressed parent", want, parent)
	sess := getSession(t, s, "s1")
	if sess.CurrentTranscript != "s1.2" || sess.Closed {
		t.Errorf("after compress: current %q closed %v, want s1.2 open", sess.CurrentTranscript, sess.Closed)
	}
	_, err = s.Compress(ctxOf(t), "s1", "s1.3", at(2*time.Minute))
	noErr(t, "compress again", err)
	if tr := getTranscript(t, s, "s1.2"); tr.Child != "s1.3" || tr.Parent != "s1" || tr.EndReason != backend.ReasonCompression {
		t.Errorf("middle of the lineage: %+v", tr)
	}
	_, err = s.Compress(ctxOf(t), "s1", "s2", at(3*time.Minute))
	wantErr(t, "compress into an existing transcript", err, backend.ErrConflict)
	_, err = s.Compress(ctxOf(t), "s1", "s1.2", at(3*time.Minute))
	wantErr(t, "compress into an existing transcript of the lineage", err, backend.ErrConflict)
	if err == nil || !strings.Contains(err.Error(), "transcript s1.2") {
		t.Errorf("compress into an existing transcript: %v, want the error to name transcript s1.2", err)
	}
	_, err = s.Compress(ctxOf(t), "s1", "s1.3", at(3*time.Minute))
	wantErr(t, "compress into the current transcript", err, backend.ErrConflict)
	if err == nil || !strings.Contains(err.Error(), "transcript s1.3") {
		t.Errorf("compress into the current transcript: %v, want the error to name transcript s1.3", err)
	}
	if cur := getSession(t, s, "s1").CurrentTranscript; cur != "s1.3" {
		t.Errorf("refused compress moved the session to %q", cur)
	}
	_, err = s.Compress(ctxOf(t), "ghost", "g.2", T0)
	wantErr(t, "compress unknown session", err, backend.ErrNotFound)
}

func testSwitch(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	tr, err := s.Switch(ctxOf(t), "s1", "branch", at(time.Minute))
	noErr(t, "switch to a new transcript", err)
	diff(t, "new transcript", backend.Transcript{ID: "branch", Session: "s1", CreatedAt: at(time.Minute)}, tr)
	if cur := getSession(t, s, "s1").CurrentTranscript; cur != "branch" {
		t.Fatalf("current %q, want branch", cur)
	}
	a := auto(t, s, "s1", "x", "A").Admission
	if a.PinnedTarget != "branch" {
		t.Errorf("pinned target after switch %q", a.PinnedTarget)
	}
	tr, err = s.Switch(ctxOf(t), "s1", "s1", at(2*time.Minute))
	noErr(t, "switch back to its own transcript", err)
	if tr.ID != "s1" || tr.Session != "s1" {
		t.Errorf("switch back returned %+v", tr)
	}
	if cur := getSession(t, s, "s1").CurrentTranscript; cur != "s1" {
		t.Fatalf("current %q, want s1", cur)
	}
	_, err = s.Switch(ctxOf(t), "s1", "s2", at(3*time.Minute))
	wantErr(t, "switch to another session's transcript", err, backend.ErrConflict)
	if cur := getSession(t, s, "s1").CurrentTranscript; cur != "s1" {
		t.Errorf("refused switch moved the session to %q", cur)
	}
	if tr := getTranscript(t, s, "s2"); tr.Session != "s2" {
		t.Errorf("refused switch changed s2's transcript: %+v", tr)
	}
	// Switching to a closed transcript of its own makes the session closed.
	_, err = s.Cancel(ctxOf(t), a.ID, at(4*time.Minute))
	noErr(t, "cancel", err)
	_, err = s.CloseSession(ctxOf(t), "s1", "resumed_other", at(4*time.Minute))
	noErr(t, "close", err)
	_, err = s.Switch(ctxOf(t), "s1", "branch", at(5*time.Minute))
	noErr(t, "switch to branch", err)
	if sess := getSession(t, s, "s1"); sess.Closed {
		t.Errorf("session on an open transcript reads closed")
	}
	_, err = s.Switch(ctxOf(t), "s1", "s1", at(6*time.Minute))
	noErr(t, "switch to the closed transcript", err)
	if sess := getSession(t, s, "s1"); !sess.Closed {
		t.Errorf("session on a closed transcript reads open")
	}
	_, err = s.Switch(ctxOf(t), "ghost", "g", T0)
	wantErr(t, "switch unknown session", err, backend.ErrNotFound)
}

// A close reason outside CloseReasons is refused, and nothing ends.
func testCloseReasonInvalid(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	for _, reason := range []string{"", "bogus", backend.ReasonCompression} {
		_, err := s.CloseSession(ctxOf(t), "s1", reason, T0)
		wantErr(t, "close with reason "+reason, err, backend.ErrInvalid)
	}
	if tr := getTranscript(t, s, "s1"); tr.Ended() {
		t.Errorf("a refused close ended the transcript: %+v", tr)
	}
}

// Compressing a session whose current transcript has ended is ErrClosed:
// the end (reason, time) is never overwritten and no child is made.
func testCompressClosed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	closed, err := s.CloseSession(ctxOf(t), "s1", "cli_close", at(time.Minute))
	noErr(t, "close", err)
	_, err = s.Compress(ctxOf(t), "s1", "s1.2", at(2*time.Minute))
	wantErr(t, "compress a closed session", err, backend.ErrClosed)
	diff(t, "closed transcript after a refused compress", closed, getTranscript(t, s, "s1"))
	if _, err := s.GetTranscript(ctxOf(t), "s1.2"); err == nil {
		t.Errorf("a refused compress created its child")
	}
	if cur := getSession(t, s, "s1").CurrentTranscript; cur != "s1" {
		t.Errorf("a refused compress moved the session to %q", cur)
	}
	// The child id stays free: for another session, and for a compress
	// that is allowed.
	_, err = s.Compress(ctxOf(t), "s1", "other", at(2*time.Minute))
	wantErr(t, "compress a closed session", err, backend.ErrClosed)
	openSession(t, s, "other")
	_, err = s.Switch(ctxOf(t), "s1", "s1.b", at(3*time.Minute))
	noErr(t, "switch to a new transcript", err)
	_, err = s.Compress(ctxOf(t), "s1", "s1.2", at(4*time.Minute))
	noErr(t, "compress with the child a refused compress named", err)
}
