package backendtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// FaultMode is how an injected fault strikes a call.
type FaultMode int

const (
	// FailBefore fails the call without calling the real store: nothing
	// was written (a refused connection).
	FailBefore FaultMode = iota
	// FailAfter calls the real store, lets it commit, and then fails the
	// call as if its reply had been lost on the way back (a connection
	// dropped after the server ran the command).
	FailAfter
	// Stall holds the call for Fault.Stall (or until its context ends,
	// which fails it as unavailable with nothing written) before calling
	// the real store: a paused server, a slow disk.
	Stall
)

// Fault is one fault to inject into calls of one Store method.
type Fault struct {
	Method string        // the Store method's name: "Settle", "RenewLease"…
	Nth    int           // strike the Nth call of Method from now (0 or 1: the next one)
	Times  int           // and this many calls in a row (0: 1)
	Mode   FaultMode     // FailBefore, FailAfter or Stall
	Err    error         // the error of a failed call; nil: a transient ErrUnavailable
	Stall  time.Duration // for Stall
}

type armedFault struct {
	Fault
	skip, left int
}

// FaultStore wraps a real store and makes chosen calls fail or stall the
// way a real store fails: before the write, after it committed with the
// reply lost, or stalled. Unarmed, it is transparent: the conformance suite
// and the admission scenarios run every store through one. Safe for
// concurrent use. Methods it does not list pass straight through to the
// real store (the embedded Store), unfaulted.
type FaultStore struct {
	backend.Store

	mu     sync.Mutex
	armed  []*armedFault
	calls  map[string]int
	struck map[string]int
}

var _ backend.Store = (*FaultStore)(nil)

// NewFaultStore wraps inner; Close closes inner.
func NewFaultStore(inner backend.Store) *FaultStore {
	return &FaultStore{Store: inner, calls: map[string]int{}, struck: map[string]int{}}
}

// Inner is the wrapped store, for looking at the truth behind a fault.
func (f *FaultStore) Inner() backend.Store { return f.Store }

// Inject arms a fault. Faults of one method strike in the order injected.
func (f *FaultStore) Inject(ft Fault) {
	if ft.Nth < 1 {
		ft.Nth = 1
	}
	if ft.Times < 1 {
		ft.Times = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = append(f.armed, &armedFault{Fault: ft, skip: ft.Nth - 1, left: ft.Times})
}

// Disarm drops every fault not yet struck.
func (f *FaultStore) Disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = nil
}

// Calls counts the calls of method so far; Struck counts those a fault hit.
func (f *FaultStore) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// Struck counts the calls of method a fault hit.
func (f *FaultStore) Struck(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.struck[method]
}

// next returns the fault striking this call of method, if any.
func (f *FaultStore) next(method string) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	for i, a := range f.armed {
		if a.Method != method {
			continue
		}
		if a.skip > 0 {
			a.skip--
			return nil
		}
		a.left--
		if a.left == 0 {
			f.armed = append(f.armed[:i:i], f.armed[i+1:]...)
		}
		f.struck[method]++
		ft := a.Fault
		return &ft
	}
	return nil
}

// errOf is the error a fault fails a call with.
func errOf(ft *Fault, method string) error {
	if ft.Err != nil {
		return ft.Err
	}
	if ft.Mode == FailAfter {
		return fmt.Errorf("faultstore: %s: connection lost after the command was sent (injected): %w", method, backend.ErrUnavailable)
	}
	return fmt.Errorf("faultstore: %s: connection refused (injected): %w", method, backend.ErrUnavailable)
}

// do runs call (the real store's method) under the fault striking it.
func (f *FaultStore) do(ctx context.Context, method string, call func() error) error {
	ft := f.next(method)
	if ft == nil {
		return call()
	}
	switch ft.Mode {
	case FailBefore:
		return errOf(ft, method)
	case FailAfter:
		_ = call()
		return errOf(ft, method)
	default: // Stall
		t := time.NewTimer(ft.Stall)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return fmt.Errorf("faultstore: %s: stalled (injected): %v: %w", method, ctx.Err(), backend.ErrUnavailable)
		case <-t.C:
		}
		return call()
	}
}

func (f *FaultStore) OpenSession(ctx context.Context, req backend.OpenSessionRequest) (s backend.Session, created bool, err error) {
	err = f.do(ctx, "OpenSession", func() (err error) { s, created, err = f.Store.OpenSession(ctx, req); return })
	if err != nil {
		return backend.Session{}, false, err
	}
	return s, created, nil
}

func (f *FaultStore) GetSession(ctx context.Context, id string, now time.Time) (s backend.Session, err error) {
	err = f.do(ctx, "GetSession", func() (err error) { s, err = f.Store.GetSession(ctx, id, now); return })
	if err != nil {
		return backend.Session{}, err
	}
	return s, nil
}

func (f *FaultStore) ListSessions(ctx context.Context, now time.Time) (out []backend.Session, err error) {
	err = f.do(ctx, "ListSessions", func() (err error) { out, err = f.Store.ListSessions(ctx, now); return })
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *FaultStore) Grant(ctx context.Context, session string, g backend.Grant) error {
	return f.do(ctx, "Grant", func() error { return f.Store.Grant(ctx, session, g) })
}

func (f *FaultStore) Admit(ctx context.Context, reqs []backend.AdmitRequest) (out []backend.AdmitResult, err error) {
	err = f.do(ctx, "Admit", func() (err error) { out, err = f.Store.Admit(ctx, reqs); return })
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *FaultStore) GetAdmission(ctx context.Context, id string) (a backend.Admission, err error) {
	err = f.do(ctx, "GetAdmission", func() (err error) { a, err = f.Store.GetAdmission(ctx, id); return })
	if err != nil {
		return backend.Admission{}, err
	}
	return a, nil
}

func (f *FaultStore) ListAdmissions(ctx context.Context, session string, flt backend.AdmissionFilter) (out []backend.Admission, err error) {
	err = f.do(ctx, "ListAdmissions", func() (err error) { out, err = f.Store.ListAdmissions(ctx, session, flt); return })
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *FaultStore) FindIdentity(ctx context.Context, session, identity string) (a backend.Admission, err error) {
	err = f.do(ctx, "FindIdentity", func() (err error) { a, err = f.Store.FindIdentity(ctx, session, identity); return })
	if err != nil {
		return backend.Admission{}, err
	}
	return a, nil
}

func (f *FaultStore) AcquireLease(ctx context.Context, req backend.LeaseRequest) (l backend.Lease, err error) {
	err = f.do(ctx, "AcquireLease", func() (err error) { l, err = f.Store.AcquireLease(ctx, req); return })
	if err != nil {
		return backend.Lease{}, err
	}
	return l, nil
}

func (f *FaultStore) RenewLease(ctx context.Context, req backend.LeaseRequest) (l backend.Lease, err error) {
	err = f.do(ctx, "RenewLease", func() (err error) { l, err = f.Store.RenewLease(ctx, req); return })
	if err != nil {
		return backend.Lease{}, err
	}
	return l, nil
}

func (f *FaultStore) ReleaseLease(ctx context.Context, req backend.LeaseRequest) error {
	return f.do(ctx, "ReleaseLease", func() error { return f.Store.ReleaseLease(ctx, req) })
}

func (f *FaultStore) Claim(ctx context.Context, req backend.ClaimRequest) (a backend.Admission, err error) {
	err = f.do(ctx, "Claim", func() (err error) { a, err = f.Store.Claim(ctx, req); return })
	if err != nil {
		return backend.Admission{}, err
	}
	return a, nil
}

func (f *FaultStore) Settle(ctx context.Context, req backend.SettleRequest) (a backend.Admission, err error) {
	err = f.do(ctx, "Settle", func() (err error) { a, err = f.Store.Settle(ctx, req); return })
	if err != nil {
		return backend.Admission{}, err
	}
	return a, nil
}

func (f *FaultStore) SettleClaim(ctx context.Context, req backend.SettleRequest, next backend.ClaimRequest) (r backend.SettleClaimResult, err error) {
	err = f.do(ctx, "SettleClaim", func() (err error) { r, err = f.Store.SettleClaim(ctx, req, next); return })
	if err != nil {
		return backend.SettleClaimResult{}, err
	}
	return r, nil
}

func (f *FaultStore) SettleRun(ctx context.Context, reqs []backend.SettleRequest) ([]backend.Admission, error) {
	var out []backend.Admission
	var innerErr error
	ran := false
	err := f.do(ctx, "SettleRun", func() error { out, innerErr = f.Store.SettleRun(ctx, reqs); ran = true; return innerErr })
	if err != nil && (!ran || err != innerErr) {
		return nil, err // failed by a fault: nothing reported settled (a lost reply)
	}
	return out, err
}

func (f *FaultStore) Requeue(ctx context.Context, req backend.SettleRequest) (a backend.Admission, err error) {
	err = f.do(ctx, "Requeue", func() (err error) { a, err = f.Store.Requeue(ctx, req); return })
	if err != nil {
		return backend.Admission{}, err
	}
	return a, nil
}

func (f *FaultStore) Resolve(ctx context.Context, id string, as backend.Resolution, now time.Time) (a backend.Admission, err error) {
	err = f.do(ctx, "Resolve", func() (err error) { a, err = f.Store.Resolve(ctx, id, as, now); return })
	if err != nil {
		return backend.Admission{}, err
	}
	return a, nil
}

func (f *FaultStore) Cancel(ctx context.Context, id string, now time.Time) (a backend.Admission, err error) {
	err = f.do(ctx, "Cancel", func() (err error) { a, err = f.Store.Cancel(ctx, id, now); return })
	if err != nil {
		return backend.Admission{}, err
	}
	return a, nil
}

func (f *FaultStore) AddViewer(ctx context.Context, session string, ttl time.Duration, now time.Time) (v backend.Viewer, err error) {
	err = f.do(ctx, "AddViewer", func() (err error) { v, err = f.Store.AddViewer(ctx, session, ttl, now); return })
	if err != nil {
		return backend.Viewer{}, err
	}
	return v, nil
}

func (f *FaultStore) RenewViewer(ctx context.Context, session, viewerID string, ttl time.Duration, now time.Time) (v backend.Viewer, err error) {
	err = f.do(ctx, "RenewViewer", func() (err error) { v, err = f.Store.RenewViewer(ctx, session, viewerID, ttl, now); return })
	if err != nil {
		return backend.Viewer{}, err
	}
	return v, nil
}

func (f *FaultStore) RemoveViewer(ctx context.Context, session, viewerID string) error {
	return f.do(ctx, "RemoveViewer", func() error { return f.Store.RemoveViewer(ctx, session, viewerID) })
}

func (f *FaultStore) GetTranscript(ctx context.Context, id string) (t backend.Transcript, err error) {
	err = f.do(ctx, "GetTranscript", func() (err error) { t, err = f.Store.GetTranscript(ctx, id); return })
	if err != nil {
		return backend.Transcript{}, err
	}
	return t, nil
}

func (f *FaultStore) ListMessages(ctx context.Context, transcript string, afterSeq uint64, limit int) (out []backend.Message, err error) {
	err = f.do(ctx, "ListMessages", func() (err error) { out, err = f.Store.ListMessages(ctx, transcript, afterSeq, limit); return })
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (f *FaultStore) CloseSession(ctx context.Context, session, reason string, now time.Time) (t backend.Transcript, err error) {
	err = f.do(ctx, "CloseSession", func() (err error) { t, err = f.Store.CloseSession(ctx, session, reason, now); return })
	if err != nil {
		return backend.Transcript{}, err
	}
	return t, nil
}

func (f *FaultStore) Compress(ctx context.Context, session, child string, now time.Time) (t backend.Transcript, err error) {
	err = f.do(ctx, "Compress", func() (err error) { t, err = f.Store.Compress(ctx, session, child, now); return })
	if err != nil {
		return backend.Transcript{}, err
	}
	return t, nil
}

func (f *FaultStore) Switch(ctx context.Context, session, t string, now time.Time) (tr backend.Transcript, err error) {
	err = f.do(ctx, "Switch", func() (err error) { tr, err = f.Store.Switch(ctx, session, t, now); return })
	if err != nil {
		return backend.Transcript{}, err
	}
	return tr, nil
}

func (f *FaultStore) Subscribe(ctx context.Context) (ch <-chan string, err error) {
	err = f.do(ctx, "Subscribe", func() (err error) { ch, err = f.Store.Subscribe(ctx); return })
	if err != nil {
		return nil, err
	}
	return ch, nil
}

func (f *FaultStore) Export(ctx context.Context, fn func(backend.Record) error) error {
	return f.do(ctx, "Export", func() error { return f.Store.Export(ctx, fn) })
}

func (f *FaultStore) Import(ctx context.Context, recs []backend.Record) (res backend.ImportResult, err error) {
	err = f.do(ctx, "Import", func() (err error) { res, err = f.Store.Import(ctx, recs); return })
	return res, err
}

// Close closes the real store; it is never faulted.
func (f *FaultStore) Close() error { return f.Store.Close() }
