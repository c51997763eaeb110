package admission_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/plugins/storage/bbolt"
)

// TestHelperHoldBoltLock is not a test: run as a child process of
// TestTargetLookupBoltLockHeld, it takes the bbolt store's file lock the way
// another hermesq process does, says "locked", and holds it for a while.
func TestHelperHoldBoltLock(t *testing.T) {
	path, hold := os.Getenv("HERMESQ_TEST_HOLD_LOCK"), os.Getenv("HERMESQ_TEST_HOLD_FOR")
	if path == "" {
		t.Skip("helper process only")
	}
	d, err := time.ParseDuration(hold)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(d)
	_ = unix.Flock(fd, unix.LOCK_UN)
	os.Exit(0)
}

// lockOnTargetRead is the real bbolt store; the first time the drainer reads
// a transcript (resolving the delivery target), it first has another process
// take the store's lock and hold it past the store's lock wait. Nothing is
// injected: the error the drainer sees is the store's own.
type lockOnTargetRead struct {
	backend.Store
	t        *testing.T
	lockPath string
	admID    string

	once      sync.Once
	child     *exec.Cmd
	statusMid backend.Status // the admission's status at the second read
	reads     int
	mu        sync.Mutex
}

func (s *lockOnTargetRead) GetTranscript(ctx context.Context, id string) (backend.Transcript, error) {
	s.mu.Lock()
	s.reads++
	n := s.reads
	s.mu.Unlock()
	s.once.Do(func() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldBoltLock$")
		cmd.Env = append(os.Environ(), "HERMESQ_TEST_HOLD_LOCK="+s.lockPath, "HERMESQ_TEST_HOLD_FOR=1500ms")
		out, err := cmd.StdoutPipe()
		if err != nil {
			s.t.Error(err)
			return
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			s.t.Error(err)
			return
		}
		s.child = cmd
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "locked" {
			s.t.Errorf("lock holder said %q", line)
		}
	})
	if n == 2 {
		// The drainer deferred once; the admission must still be queued.
		if a, err := s.Store.GetAdmission(ctx, s.admID); err == nil {
			s.statusMid = a.Status
		}
	}
	return s.Store.GetTranscript(ctx, id)
}

// TestTargetLookupBoltLockHeld: a target lookup that meets the bbolt lock
// held by another process past the wait is a transient failure (docs/contract.md §5):
// the admission stays queued, the drainer retries with backoff, and the
// completion is delivered once the lock is free, as exactly one note.
func TestTargetLookupBoltLockHeld(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	real, err := bbolt.Open(ctx, path, backend.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	st := &lockOnTargetRead{Store: real, t: t, lockPath: path + ".lock"}
	svc := &admission.Service{Store: st}
	if _, _, err := real.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Admit(ctx, admission.Input{Session: "s1", Principal: "alice", Producer: "process",
		Identities: []string{`["completion","proc_lock","1700000000.0"]`}, Text: "[finished] RESULT_lock", Target: "s1"})
	if err != nil || res.Err != nil {
		t.Fatalf("admit: %v %v", err, res.Err)
	}
	st.admID = res.Admission.ID

	rep, err := svc.Drain(ctx, "s1", admission.DrainOptions{Principal: "alice", Lease: 30 * time.Second, Log: t.Logf,
		// A handler, so the first transcript read is the drain's own target
		// lookup under its lease; a note never runs it.
		Handler: &admission.Handler{Argv: []string{"false"}}})
	if st.child != nil {
		_ = st.child.Wait()
	}
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if rep.Deferred < 1 {
		t.Errorf("deferred %d target lookups; the held lock should have deferred at least one", rep.Deferred)
	}
	if st.statusMid != backend.StatusQueued {
		t.Errorf("while the lock was held the admission was %q, want queued", st.statusMid)
	}
	a, err := real.GetAdmission(ctx, st.admID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != backend.StatusDone || a.Outcome != backend.OutcomeCompleted || a.Mode != backend.ModeNote {
		t.Errorf("admission after the drain: %s/%s/%s, want done/completed/note", a.Status, a.Outcome, a.Mode)
	}
	msgs, err := real.ListMessages(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Role != backend.RoleNote || msgs[0].Content != "[finished] RESULT_lock" {
		t.Errorf("transcript s1: %+v, want exactly one note", msgs)
	}
}
