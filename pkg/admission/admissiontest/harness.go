// Package admissiontest runs the contract's scenarios (docs/contract.md §2–§5)
// through an admission.Service on any backend.Store: every store's tests
// call RunScenarios with a constructor of a fresh, empty store.
//
// Turns run a real handler process (HandlerBinary) that echoes its turn
// input; nothing is mocked. The Service sees the real store through a
// backendtest.FaultStore, transparent until a scenario arms it to make a
// call fail or stall the way a locked, paused or unreachable store does.
package admissiontest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
)

// owner is the principal every scenario admits as.
const owner = "alice"

// waitLimit bounds how long a scenario waits for something another
// goroutine or process does; it is a hang guard, not a timing assertion.
const waitLimit = 60 * time.Second

// harness is one scenario's world: a fresh store, a Service over it, the
// handler binary and the file the handler records its invocations in.
type harness struct {
	t      *testing.T
	ctx    context.Context
	store  backend.Store // the real store, for looking at the truth
	faults *backendtest.FaultStore
	svc    *admission.Service // over faults
	bin    string
	record string
}

func newHarness(t *testing.T, newStore func(t *testing.T) backend.Store) *harness {
	t.Helper()
	st := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	fs := backendtest.NewFaultStore(st)
	return &harness{
		t: t, ctx: ctx, store: st, faults: fs,
		svc:    &admission.Service{Store: fs},
		bin:    HandlerBinary(t),
		record: filepath.Join(t.TempDir(), "invocations.jsonl"),
	}
}

// ident builds an identity the way producers do: compact JSON of its parts.
func ident(parts ...string) string {
	b, _ := json.Marshal(parts)
	return string(b)
}

func (h *harness) openSession(id string) backend.Session {
	h.t.Helper()
	s, _, err := h.store.OpenSession(h.ctx, backend.OpenSessionRequest{ID: id, Owner: owner, Now: time.Now()})
	if err != nil {
		h.t.Fatalf("open session %s: %v", id, err)
	}
	return s
}

func (h *harness) session(id string) backend.Session {
	h.t.Helper()
	s, err := h.store.GetSession(h.ctx, id, time.Time{})
	if err != nil {
		h.t.Fatalf("get session %s: %v", id, err)
	}
	return s
}

func (h *harness) human(session, text string) backend.AdmitResult {
	h.t.Helper()
	r, err := h.svc.Admit(h.ctx, admission.Input{Session: session, Text: text, Principal: owner})
	if err != nil {
		h.t.Fatalf("admit human %q to %s: %v", text, session, err)
	}
	if r.Result != backend.ResultAdmitted {
		h.t.Fatalf("admit human %q: result %q, want admitted", text, r.Result)
	}
	return r
}

func (h *harness) offer(session, producer string, ids []string, text, target string) backend.AdmitResult {
	h.t.Helper()
	r, err := h.svc.Admit(h.ctx, admission.Input{
		Session: session, Text: text, Producer: producer, Identities: ids, Target: target, Principal: owner,
	})
	if err != nil {
		h.t.Fatalf("offer %v to %s: %v", ids, session, err)
	}
	return r
}

// offerParts offers an automation group with one text part per identity.
func (h *harness) offerParts(session, producer string, ids, texts []string) backend.AdmitResult {
	h.t.Helper()
	parts := make([]admission.Part, len(ids))
	for i := range ids {
		parts[i] = admission.Part{Identity: ids[i], Text: texts[i]}
	}
	r, err := h.svc.Admit(h.ctx, admission.Input{Session: session, Producer: producer, Parts: parts, Principal: owner})
	if err != nil {
		h.t.Fatalf("offer parts %v to %s: %v", ids, session, err)
	}
	return r
}

// handler is the scenarios' handler, recording its invocations, with extra
// HQT_* switches.
func (h *harness) handler(env ...string) *admission.Handler {
	return &admission.Handler{Argv: []string{h.bin}, Env: append([]string{"HQT_RECORD=" + h.record}, env...)}
}

func (h *harness) opts() admission.DrainOptions {
	return admission.DrainOptions{Principal: owner, Handler: h.handler(), Lease: 30 * time.Second}
}

// drain drains the session with a recording handler; it fails the test on
// an error.
func (h *harness) drain(session string) admission.DrainReport {
	h.t.Helper()
	rep, err := h.svc.Drain(h.ctx, session, h.opts())
	if err != nil {
		h.t.Fatalf("drain %s: %v", session, err)
	}
	return rep
}

// invocation is one run of the handler as it recorded it.
type invocation struct {
	Admission    string            `json:"admission"`
	Session      string            `json:"session"`
	Target       string            `json:"target"`
	Text         string            `json:"text"`
	NotesSeen    int               `json:"notes_seen"`
	MessageCount int               `json:"message_count"`
	Env          map[string]string `json:"env"`
}

func (h *harness) turns() []invocation {
	h.t.Helper()
	f, err := os.Open(h.record)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	var out []invocation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var in invocation
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			h.t.Fatalf("handler record %q: %v", sc.Text(), err)
		}
		out = append(out, in)
	}
	return out
}

// turnTexts lists "text/notes_seen" of every handler invocation.
func (h *harness) turnTexts() []string {
	var out []string
	for _, in := range h.turns() {
		out = append(out, in.Text+"/"+itoa(in.NotesSeen))
	}
	return out
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func (h *harness) messages(transcript string) []backend.Message {
	h.t.Helper()
	ms, err := h.store.ListMessages(h.ctx, transcript, 0, 0)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		h.t.Fatalf("list messages of %s: %v", transcript, err)
	}
	return ms
}

// roles renders a transcript as "role:content" lines.
func (h *harness) roles(transcript string) []string {
	var out []string
	for _, m := range h.messages(transcript) {
		out = append(out, string(m.Role)+":"+m.Content)
	}
	return out
}

func (h *harness) notes(transcript string) []string {
	var out []string
	for _, m := range h.messages(transcript) {
		if m.Role == backend.RoleNote {
			out = append(out, m.Content)
		}
	}
	return out
}

// notesOf counts the notes on transcript written for one admission.
func (h *harness) notesOf(transcript, admissionID string) int {
	n := 0
	for _, m := range h.messages(transcript) {
		if m.Role == backend.RoleNote && metaString(m, "admission_id") == admissionID {
			n++
		}
	}
	return n
}

func metaString(m backend.Message, k string) string {
	s, _ := m.Metadata[k].(string)
	return s
}

func (h *harness) transcript(id string) backend.Transcript {
	h.t.Helper()
	tr, err := h.store.GetTranscript(h.ctx, id)
	if err != nil {
		h.t.Fatalf("get transcript %s: %v", id, err)
	}
	return tr
}

func (h *harness) admissions(session string, f backend.AdmissionFilter) []backend.Admission {
	h.t.Helper()
	as, err := h.store.ListAdmissions(h.ctx, session, f)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		h.t.Fatalf("list admissions of %s: %v", session, err)
	}
	return as
}

func (h *harness) admission(id string) backend.Admission {
	h.t.Helper()
	a, err := h.store.GetAdmission(h.ctx, id)
	if err != nil {
		h.t.Fatalf("get admission %s: %v", id, err)
	}
	return a
}

// state renders an admission as "status/outcome/mode".
func state(a backend.Admission) string {
	return string(a.Status) + "/" + string(a.Outcome) + "/" + string(a.Mode)
}

func (h *harness) wantState(id, want string) backend.Admission {
	h.t.Helper()
	a := h.admission(id)
	if got := state(a); got != want {
		h.t.Errorf("admission %s (%q): state %s, want %s (error %q)", id, a.Text(), got, want, a.Error)
	}
	return a
}

// eventually polls cond until it holds; a hang guard, not a timing check.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// makeUnknown leaves the session's head running under a drainer that then
// vanished: a lease taken in the past (already expired) and a claim never
// settled. The next drainer's new epoch finds it and marks it unknown.
func (h *harness) makeUnknown(session, id string) {
	h.t.Helper()
	l, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner,
		Session: session, Holder: "vanished", TTL: time.Second, Now: time.Now().Add(-time.Hour),
	})
	if err != nil {
		h.t.Fatalf("acquire lease for the vanished drainer: %v", err)
	}
	a, err := h.store.Claim(h.ctx, backend.ClaimRequest{
		Session: session, AdmissionID: id, Epoch: l.Epoch, Mode: backend.ModeTurn,
		DeliveredTo: h.session(session).CurrentTranscript, Now: time.Now().Add(-time.Hour),
	})
	if err != nil {
		h.t.Fatalf("claim %s for the vanished drainer: %v", id, err)
	}
	if a.Status != backend.StatusRunning {
		h.t.Fatalf("claimed %s: status %s, want running", id, a.Status)
	}
}

func eq(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (h *harness) wantStrings(what string, got, want []string) {
	h.t.Helper()
	if !eq(got, want) {
		h.t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func textOf(a backend.Admission) string { return a.Text() }
