// Package backendtest is the conformance suite every hermesq store passes:
// a store's own test file is a few lines calling RunConformanceTests (and
// RunBenchmarks) with a constructor of fresh, empty stores.
//
// The suite tests only the backend.Store contract (pkg/backend/store.go and
// its role files, docs/contract.md §2, §4, §5, §7). Its cases are grouped as
// the Store is: one file a role, named for it (sessions.go, admissions.go,
// drain.go, transcripts.go, maintenance.go), running that role's cases,
// which live in files with the role as prefix (drain_lease.go,
// maintenance_compact.go…); the cases that cross roles keep their own
// files (concurrency.go, divergence.go, faults.go).
//
// Time is steered through the requests' Now fields (and GetSession's and
// ListSessions' now, which count live viewers), never by sleeping. Times
// used are whole seconds, so a store may keep times at millisecond
// precision.
package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hermesq/hermesq/pkg/backend"
)

// T0 is the start of the suite's steered clock.
var T0 = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// Principals used by the suite.
const (
	Owner    = "alice"
	Other    = "mallory"
	Producer = "process"
)

// cmpOpts compares store values: empty and nil slices and maps alike,
// times by instant.
var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

type suiteTest struct {
	name string
	fn   func(t *testing.T, s backend.Store)
	// fresh, instead of fn, makes its own stores.
	fresh func(t *testing.T, newStore func(t *testing.T) backend.Store)
}

// RunConformanceTests runs every conformance test, each in a parallel
// subtest on its own fresh store from newStore, seen through a FaultStore
// (transparent until a test arms a fault). newStore registers any cleanup
// (closing the store, removing files) with t.Cleanup. The cases are
// grouped by the role of backend.Store they hold to, one file a role
// (sessions.go, admissions.go, drain.go, transcripts.go, maintenance.go),
// then those that cross roles: concurrency, divergence, faults.
func RunConformanceTests(t *testing.T, newStore func(t *testing.T) backend.Store) {
	t.Helper()
	wrapped := func(t *testing.T) backend.Store { return NewFaultStore(newStore(t)) }
	testSessions(t, wrapped)
	testAdmissions(t, wrapped)
	testDrain(t, wrapped)
	testTranscripts(t, wrapped)
	testMaintenance(t, wrapped)
	runCases(t, wrapped, concurrencyTests, divergenceTests, faultTests)
}

// runCases runs each case of each list in a parallel subtest of t named
// for the case, on its own store from newStore (or, for a fresh case,
// handing it newStore).
func runCases(t *testing.T, newStore func(t *testing.T) backend.Store, lists ...[]suiteTest) {
	t.Helper()
	for _, list := range lists {
		for _, tc := range list {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if tc.fresh != nil {
					tc.fresh(t, newStore)
					return
				}
				tc.fn(t, newStore(t))
			})
		}
	}
}

func ctxOf(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Payload returns the canonical payload {"text": text}.
func Payload(text string) json.RawMessage {
	b, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		panic(err)
	}
	return b
}

// at returns T0 + d.
func at(d time.Duration) time.Time { return T0.Add(d) }

func wantErr(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: error %v, want one wrapping %q", what, err, sentinel)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpOpts...); d != "" {
		t.Errorf("%s: mismatch (-want +got):\n%s", what, d)
	}
}

func openSession(t *testing.T, s backend.Store, id string) backend.Session {
	t.Helper()
	sess, created, err := s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: id, Owner: Owner, Now: T0})
	noErr(t, "open session "+id, err)
	if !created {
		t.Fatalf("open session %s: created false for a new session", id)
	}
	return sess
}

func getSession(t *testing.T, s backend.Store, id string) backend.Session {
	t.Helper()
	sess, err := s.GetSession(ctxOf(t), id, time.Time{})
	noErr(t, "get session "+id, err)
	return sess
}

func getAdmission(t *testing.T, s backend.Store, id string) backend.Admission {
	t.Helper()
	a, err := s.GetAdmission(ctxOf(t), id)
	noErr(t, "get admission "+id, err)
	return a
}

func getTranscript(t *testing.T, s backend.Store, id string) backend.Transcript {
	t.Helper()
	tr, err := s.GetTranscript(ctxOf(t), id)
	noErr(t, "get transcript "+id, err)
	return tr
}

func listAdmissions(t *testing.T, s backend.Store, session string, f backend.AdmissionFilter) []backend.Admission {
	t.Helper()
	as, err := s.ListAdmissions(ctxOf(t), session, f)
	noErr(t, "list admissions of "+session, err)
	return as
}

func listMessages(t *testing.T, s backend.Store, transcript string) []backend.Message {
	t.Helper()
	ms, err := s.ListMessages(ctxOf(t), transcript, 0, 0)
	noErr(t, "list messages of "+transcript, err)
	return ms
}

// admit1 runs one request and returns its result; a whole-call error fails
// the test.
func admit1(t *testing.T, s backend.Store, req backend.AdmitRequest) backend.AdmitResult {
	t.Helper()
	if req.Now.IsZero() {
		req.Now = T0
	}
	res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{req})
	noErr(t, "admit", err)
	if len(res) != 1 {
		t.Fatalf("admit: %d results for 1 request", len(res))
	}
	return res[0]
}

// human admits a human input by Owner and requires it admitted.
func human(t *testing.T, s backend.Store, session, text string) backend.Admission {
	t.Helper()
	res := admit1(t, s, backend.AdmitRequest{Session: session, Kind: backend.KindHuman, Principal: Owner, Payload: Payload(text)})
	noErr(t, "admit human "+text, res.Err)
	if res.Result != backend.ResultAdmitted {
		t.Fatalf("admit human %q: result %q, want admitted", text, res.Result)
	}
	return res.Admission
}

func autoReq(session, text string, idents ...string) backend.AdmitRequest {
	return backend.AdmitRequest{
		Session: session, Kind: backend.KindAutomation, Producer: Producer, Principal: Owner,
		Identities: idents, Payload: Payload(text), Now: T0,
	}
}

// auto offers an automation input and returns its result, which must not
// be an error.
func auto(t *testing.T, s backend.Store, session, text string, idents ...string) backend.AdmitResult {
	t.Helper()
	res := admit1(t, s, autoReq(session, text, idents...))
	noErr(t, fmt.Sprintf("admit automation %v", idents), res.Err)
	return res
}

func acquire(t *testing.T, s backend.Store, session, holder string, now time.Time) backend.Lease {
	t.Helper()
	l, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: session, Holder: holder, TTL: 30 * time.Second, Now: now})
	noErr(t, "acquire lease of "+session+" for "+holder, err)
	return l
}

func claim(t *testing.T, s backend.Store, l backend.Lease, id string, now time.Time) backend.Admission {
	t.Helper()
	a, err := s.Claim(ctxOf(t), backend.ClaimRequest{
		Session: l.Session, AdmissionID: id, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: l.Session, Now: now,
	})
	noErr(t, "claim "+id, err)
	return a
}

// turnMessages are a turn's user input and assistant reply on transcript.
func turnMessages(transcript, in, out string) []backend.NewMessage {
	return []backend.NewMessage{
		{Transcript: transcript, Role: backend.RoleUser, Content: in},
		{Transcript: transcript, Role: backend.RoleAssistant, Content: out},
	}
}

// settleTurn settles a claimed admission as completed with a turn's messages
// on its DeliveredTo transcript.
func settleTurn(t *testing.T, s backend.Store, a backend.Admission, reply string, now time.Time) backend.Admission {
	t.Helper()
	out, err := s.Settle(ctxOf(t), backend.SettleRequest{
		Session: a.Session, AdmissionID: a.ID, Epoch: a.Epoch, Generation: a.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages(a.DeliveredTo, a.Text(), reply), Now: now,
	})
	noErr(t, "settle "+a.ID, err)
	return out
}

// noteMessage is the note a drainer writes for an automation admission.
func noteMessage(transcript string, a backend.Admission) backend.NewMessage {
	ids := make([]any, len(a.Identities))
	for i, id := range a.Identities {
		ids[i] = id
	}
	return backend.NewMessage{
		Transcript: transcript, Role: backend.RoleNote, Content: a.Text(),
		Metadata: map[string]any{"admission_id": a.ID, "producer": a.Producer, "identities": ids},
	}
}

func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctxOf(t))
	t.Cleanup(cancel)
	return ctx, cancel
}

// importErr imports recs into s and returns only the error.
func importErr(t *testing.T, s backend.Store, recs []backend.Record) error {
	t.Helper()
	_, err := s.Import(ctxOf(t), recs)
	return err
}
