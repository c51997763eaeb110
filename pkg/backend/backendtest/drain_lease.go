package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var drainLeaseTests = []suiteTest{
	{name: "Lease/Acquire", fn: testLeaseAcquire},
	{name: "Lease/Recovery", fn: testLeaseRecovery},
	{name: "Lease/RenewRelease", fn: testLeaseRenewRelease},
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/DefaultTTLs", fn: testDefaultTTLs},
}

func testLeaseAcquire(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	before := getSession(t, s, "s1").Epoch
	l := acquire(t, s, "s1", "A", T0)
	want := backend.Lease{Session: "s1", Holder: "A", Epoch: before + 1, ExpiresAt: at(30 * time.Second)}
	diff(t, "lease", want, l)
	sess := getSession(t, s, "s1")
	if sess.Epoch != l.Epoch || sess.LeaseHolder != "A" || !sess.LeaseLive(at(29*time.Second)) || sess.LeaseLive(at(31*time.Second)) {
		t.Errorf("session after acquire: epoch %d holder %q expires %v", sess.Epoch, sess.LeaseHolder, sess.LeaseExpiresAt)
	}
	_, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "B", TTL: 30 * time.Second, Now: at(29 * time.Second)})
	wantErr(t, "acquire a live lease", err, backend.ErrLeaseHeld)
	wantErr(t, "acquire a live lease", err, backend.ErrFenced)
	if e := getSession(t, s, "s1").Epoch; e != l.Epoch {
		t.Errorf("refused acquire moved the epoch to %d", e)
	}
	l2 := acquire(t, s, "s1", "B", at(31*time.Second))
	if l2.Epoch != l.Epoch+1 || l2.Holder != "B" {
		t.Errorf("takeover after expiry: epoch %d holder %q, want %d B", l2.Epoch, l2.Holder, l.Epoch+1)
	}
	_, err = s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "ghost", Holder: "A", TTL: time.Second, Now: T0})
	wantErr(t, "acquire lease of unknown session", err, backend.ErrNotFound)
}

func testLeaseRecovery(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	b := human(t, s, "s1", "two")
	l := acquire(t, s, "s1", "A", T0)
	claim(t, s, l, a.ID, T0)
	l2 := acquire(t, s, "s1", "B", at(time.Minute))
	diff(t, "recovered", []string{a.ID}, l2.Recovered)
	got := getAdmission(t, s, a.ID)
	if got.Status != backend.StatusUnknown || got.Outcome != "" {
		t.Errorf("running admission after takeover: status %s outcome %q, want unknown", got.Status, got.Outcome)
	}
	if got := getAdmission(t, s, b.ID); got.Status != backend.StatusQueued {
		t.Errorf("queued admission after takeover: status %s, want queued", got.Status)
	}
	sess := getSession(t, s, "s1")
	if sess.Unknown != 1 || sess.Running != 0 || sess.Queued != 1 || sess.State() != backend.StatePaused {
		t.Errorf("session after takeover: unknown %d running %d queued %d state %s", sess.Unknown, sess.Running, sess.Queued, sess.State())
	}
	// An unknown admission is not recovered again.
	l3 := acquire(t, s, "s1", "C", at(time.Hour))
	if len(l3.Recovered) != 0 {
		t.Errorf("second takeover recovered %v", l3.Recovered)
	}
}

func testLeaseRenewRelease(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	l := acquire(t, s, "s1", "A", T0)
	r, err := s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch, TTL: time.Minute, Now: at(20 * time.Second)})
	noErr(t, "renew", err)
	if r.Epoch != l.Epoch || !r.ExpiresAt.Equal(at(80*time.Second)) {
		t.Errorf("renewed lease: epoch %d expires %v, want %d %v", r.Epoch, r.ExpiresAt, l.Epoch, at(80*time.Second))
	}
	_, err = s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "B", TTL: time.Minute, Now: at(60 * time.Second)})
	wantErr(t, "acquire a renewed lease", err, backend.ErrLeaseHeld)
	// A renewal that reaches the store late (sent before the one above)
	// never shortens the lease: its holder counts on the later expiry.
	r, err = s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch, TTL: time.Minute, Now: at(10 * time.Second)})
	noErr(t, "a late renewal", err)
	if !r.ExpiresAt.Equal(at(80 * time.Second)) {
		t.Errorf("a late renewal: lease expires %v, want the later %v kept", r.ExpiresAt, at(80*time.Second))
	}
	if exp := getSession(t, s, "s1").LeaseExpiresAt; !exp.Equal(at(80 * time.Second)) {
		t.Errorf("a late renewal: the session's lease expires %v, want %v", exp, at(80*time.Second))
	}
	_, err = s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "B", TTL: time.Minute, Now: at(75 * time.Second)})
	wantErr(t, "acquire a lease a late renewal reached", err, backend.ErrLeaseHeld)
	_, err = s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch + 1, TTL: time.Minute, Now: at(20 * time.Second)})
	wantErr(t, "renew with a wrong epoch", err, backend.ErrFenced)
	_, err = s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "B", Epoch: l.Epoch, TTL: time.Minute, Now: at(20 * time.Second)})
	wantErr(t, "renew by another holder", err, backend.ErrFenced)

	noErr(t, "release with a stale epoch", s.ReleaseLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch - 1}))
	if h := getSession(t, s, "s1").LeaseHolder; h != "A" {
		t.Fatalf("stale release changed the holder to %q", h)
	}
	noErr(t, "release", s.ReleaseLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch}))
	sess := getSession(t, s, "s1")
	if sess.LeaseHolder != "" || sess.LeaseLive(at(21*time.Second)) || sess.Epoch != l.Epoch {
		t.Errorf("after release: holder %q epoch %d, want none and epoch kept %d", sess.LeaseHolder, sess.Epoch, l.Epoch)
	}
	noErr(t, "release again", s.ReleaseLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch}))
	_, err = s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch, TTL: time.Minute, Now: at(21 * time.Second)})
	wantErr(t, "renew a released lease", err, backend.ErrFenced)
	l2 := acquire(t, s, "s1", "B", at(21*time.Second))
	if l2.Epoch != l.Epoch+1 {
		t.Errorf("acquire after release: epoch %d, want %d", l2.Epoch, l.Epoch+1)
	}
}

// A lease or viewer ttl of 0 means the defaults of pkg/backend, never an
// already expired lease.
func testDefaultTTLs(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	l, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "A", Now: T0})
	noErr(t, "acquire with ttl 0", err)
	if !l.ExpiresAt.Equal(at(backend.DefaultLeaseTTL)) {
		t.Errorf("lease of ttl 0 expires %v, want %v", l.ExpiresAt, at(backend.DefaultLeaseTTL))
	}
	_, err = s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "B", TTL: time.Second, Now: at(time.Second)})
	wantErr(t, "acquire a lease taken with ttl 0", err, backend.ErrLeaseHeld)
	r, err := s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch, Now: at(time.Minute)})
	noErr(t, "renew with ttl 0", err)
	if !r.ExpiresAt.Equal(at(time.Minute + backend.DefaultLeaseTTL)) {
		t.Errorf("lease renewed with ttl 0 expires %v, want %v", r.ExpiresAt, at(time.Minute+backend.DefaultLeaseTTL))
	}
	if got := getSession(t, s, "s1").LeaseExpiresAt; !got.Equal(r.ExpiresAt) {
		t.Errorf("session lease expiry %v, want %v", got, r.ExpiresAt)
	}

	now := time.Now().Truncate(time.Second)
	v, err := s.AddViewer(ctxOf(t), "s1", 0, now)
	noErr(t, "add viewer with ttl 0", err)
	if !v.ExpiresAt.Equal(now.Add(backend.DefaultViewerTTL)) {
		t.Errorf("viewer of ttl 0 expires %v, want %v", v.ExpiresAt, now.Add(backend.DefaultViewerTTL))
	}
	if n := getSession(t, s, "s1").Viewers; n != 1 {
		t.Errorf("a viewer of ttl 0 counts as %d live viewers, want 1", n)
	}
	rv, err := s.RenewViewer(ctxOf(t), "s1", v.ID, 0, now)
	noErr(t, "renew viewer with ttl 0", err)
	if !rv.ExpiresAt.Equal(now.Add(backend.DefaultViewerTTL)) {
		t.Errorf("viewer renewed with ttl 0 expires %v, want %v", rv.ExpiresAt, now.Add(backend.DefaultViewerTTL))
	}
}
