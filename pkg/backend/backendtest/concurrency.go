package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Racers is how many goroutines the concurrency tests race.
const Racers = 16

var concurrencyTests = []suiteTest{
	{name: "Concurrent/SameRequestID", fn: testRaceRequestID},
	{name: "Concurrent/SameIdentities", fn: testRaceIdentities},
	{name: "Concurrent/DistinctAdmits", fn: testRaceDistinct},
	{name: "Concurrent/AcquireLease", fn: testRaceLease},
	{name: "Concurrent/Claim", fn: testRaceClaim},
	{name: "Concurrent/RefusalsAmongAdmits", fn: testRaceRefusals},
}

// race runs fn on Racers goroutines released at once.
func race(fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < Racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// admitRaced admits one request from a racing goroutine (no t.Fatal off
// the test goroutine).
func admitRaced(s backend.Store, t *testing.T, req backend.AdmitRequest) (backend.AdmitResult, error) {
	res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{req})
	if err != nil {
		return backend.AdmitResult{}, err
	}
	if len(res) != 1 {
		return backend.AdmitResult{}, fmt.Errorf("%d results", len(res))
	}
	return res[0], res[0].Err
}

func countResults(t *testing.T, results []backend.AdmitResult, errs []error) (admitted int, ids map[string]int) {
	t.Helper()
	ids = map[string]int{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		if r.Result != backend.ResultDuplicate {
			admitted++
		}
		ids[r.Admission.ID]++
	}
	return admitted, ids
}

func testRaceRequestID(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	results := make([]backend.AdmitResult, Racers)
	errs := make([]error, Racers)
	race(func(i int) {
		results[i], errs[i] = admitRaced(s, t, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner,
			RequestID: "same", Payload: Payload("same"), Now: T0})
	})
	admitted, ids := countResults(t, results, errs)
	if admitted != 1 || len(ids) != 1 {
		t.Fatalf("%d racers with one request id: %d admitted, %d distinct admissions; want 1 and 1", Racers, admitted, len(ids))
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 1 {
		t.Fatalf("%d admissions stored, want 1", n)
	}
}

func testRaceIdentities(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	results := make([]backend.AdmitResult, Racers)
	errs := make([]error, Racers)
	race(func(i int) {
		idents := []string{"X", "Y"}
		if i%2 == 1 {
			idents = []string{"Y", "X"}
		}
		results[i], errs[i] = admitRaced(s, t, autoReq("s1", "x and y", idents...))
	})
	admitted, ids := countResults(t, results, errs)
	if admitted != 1 || len(ids) != 1 {
		t.Fatalf("%d racers with the same identities: %d not duplicate, %d distinct admissions; want 1 and 1", Racers, admitted, len(ids))
	}
	for _, r := range results {
		if r.Result != backend.ResultDuplicate && r.Result != backend.ResultCoalesced {
			t.Errorf("result %q, want coalesced or duplicate", r.Result)
		}
	}
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(all) != 1 || len(all[0].Identities) != 2 {
		t.Fatalf("stored %d admissions (%+v), want 1 carrying X and Y", len(all), all)
	}
}

func testRaceDistinct(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	const each = 8
	seqs := make([][]uint64, Racers)
	errs := make([]error, Racers)
	race(func(i int) {
		for j := 0; j < each; j++ {
			var req backend.AdmitRequest
			if j%2 == 0 {
				req = backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, Payload: Payload(fmt.Sprint(i, "/", j)), Now: T0}
			} else {
				req = autoReq("s1", fmt.Sprint(i, "/", j), fmt.Sprint("id-", i, "-", j))
			}
			res, err := admitRaced(s, t, req)
			if err == nil && res.Result == backend.ResultDuplicate {
				err = errors.New("distinct input reported duplicate")
			}
			if err != nil {
				errs[i] = err
				return
			}
			seqs[i] = append(seqs[i], res.Admission.Seq)
		}
	})
	seen := map[uint64]bool{}
	for i := range seqs {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		for j, seq := range seqs[i] {
			if seen[seq] {
				t.Fatalf("seq %d given twice", seq)
			}
			seen[seq] = true
			if j > 0 && seq <= seqs[i][j-1] {
				t.Errorf("racer %d: seq %d after %d", i, seq, seqs[i][j-1])
			}
		}
	}
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(all) != Racers*each {
		t.Fatalf("%d admissions stored, want %d", len(all), Racers*each)
	}
	for k := 1; k < len(all); k++ {
		if all[k].Seq <= all[k-1].Seq {
			t.Fatalf("listing: seq %d after %d", all[k].Seq, all[k-1].Seq)
		}
	}
	if sess := getSession(t, s, "s1"); sess.Queued != Racers*each {
		t.Errorf("depth %d, want %d", sess.Queued, Racers*each)
	}
}

func testRaceLease(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	leases := make([]backend.Lease, Racers)
	errs := make([]error, Racers)
	race(func(i int) {
		leases[i], errs[i] = s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: fmt.Sprint("drainer-", i), TTL: time.Minute, Now: T0})
	})
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			if sess := getSession(t, s, "s1"); sess.LeaseHolder != leases[i].Holder || sess.Epoch != leases[i].Epoch {
				t.Errorf("winner %s epoch %d, session says %s epoch %d", leases[i].Holder, leases[i].Epoch, sess.LeaseHolder, sess.Epoch)
			}
		case !errors.Is(err, backend.ErrLeaseHeld):
			t.Errorf("racer %d: %v, want ErrLeaseHeld", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d racers won the lease, want exactly 1", winners)
	}
}

// testRaceRefusals races refused requests (conflict, forbidden, not found,
// closed) with good ones: a store that groups concurrent writes must not
// let one request's refusal undo or drop another's admission.
func testRaceRefusals(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "shut")
	_, err := s.CloseSession(ctxOf(t), "shut", "cli_close", T0)
	noErr(t, "close", err)
	first := admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "taken", Payload: Payload("first")})
	noErr(t, "admit", first.Err)
	const rounds = 6
	errs := make([]error, Racers)
	race(func(i int) {
		for j := 0; j < rounds; j++ {
			var bad backend.AdmitRequest
			var want error
			switch (i + j) % 4 {
			case 0:
				bad, want = backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "taken", Payload: Payload(fmt.Sprint("other ", i, j))}, backend.ErrConflict
			case 1:
				bad, want = backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Other, Payload: Payload("x")}, backend.ErrForbidden
			case 2:
				bad, want = autoReq("ghost", "x", fmt.Sprint("g", i, j)), backend.ErrNotFound
			case 3:
				bad, want = backend.AdmitRequest{Session: "shut", Kind: backend.KindHuman, Principal: Owner, Payload: Payload("x")}, backend.ErrClosed
			}
			bad.Now = T0
			if _, err := admitRaced(s, t, bad); !errors.Is(err, want) {
				errs[i] = fmt.Errorf("refused request %d/%d: %v, want %v", i, j, err, want)
				return
			}
			res, err := admitRaced(s, t, autoReq("s1", "good", fmt.Sprint("good-", i, "-", j)))
			if err == nil && res.Result != backend.ResultAdmitted {
				err = fmt.Errorf("result %q", res.Result)
			}
			if err != nil {
				errs[i] = fmt.Errorf("good request %d/%d: %v", i, j, err)
				return
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all := listAdmissions(t, s, "s1", backend.AdmissionFilter{})
	if len(all) != 1+Racers*rounds {
		t.Fatalf("%d admissions, want %d", len(all), 1+Racers*rounds)
	}
	diff(t, "the request id's admission", first.Admission, all[0])
	if n := len(listAdmissions(t, s, "shut", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("closed session got %d admissions", n)
	}
	if _, err := s.GetSession(ctxOf(t), "ghost", time.Time{}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("unknown session after automation offers: %v", err)
	}
}

// testRaceClaim: drainers of one epoch racing for the head (a bug in a
// caller, but the store must still start it once).
func testRaceClaim(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	human(t, s, "s1", "two")
	l := acquire(t, s, "s1", "A", T0)
	errs := make([]error, Racers)
	race(func(i int) {
		_, errs[i] = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: a.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, Now: T0})
	})
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
		case !errors.Is(err, backend.ErrBusy) && !errors.Is(err, backend.ErrNotHead):
			t.Errorf("racer %d: %v, want ErrBusy or ErrNotHead", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d racers claimed the head, want exactly 1", winners)
	}
	if sess := getSession(t, s, "s1"); sess.Running != 1 || sess.Queued != 1 || sess.Generation != getAdmission(t, s, a.ID).Generation {
		t.Errorf("after the race: running %d queued %d generation %d", sess.Running, sess.Queued, sess.Generation)
	}
}
