package acceptance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/producer"
)

// childPIDs lists the child processes of pid (Linux /proc).
func childPIDs(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestChaosProducers (issue 23, acceptance 6): the delegation and process
// producers record events into their outboxes while `producers run` (as
// dave, who holds a writer grant from the sessions' owner alice) delivers
// them, and meanwhile the store takes no writes for a while (Redis: CLIENT
// PAUSE WRITE; bbolt: its lock held by another process past dave's
// timeout), dave's grant on a session is revoked and restored (the store
// refuses his admissions), and plugins are killed with SIGKILL. At the end
// every recorded event is delivered exactly once: the outboxes and the
// store compared event by event; none dropped, none rejected, and after a
// drain each is noted once. Small by default; HERMESQ_CHAOS=1 runs
// HERMESQ_CHAOS_INPUTS events (default 2000).
func TestChaosProducers(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("needs Linux /proc to find the plugin processes")
	}
	t.Run("bbolt", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "hermesq.db")
		as := func(p string) *cli {
			c := newCLI(t, "bbolt://"+db)
			c.env = append(c.env, "HERMESQ_PRINCIPAL_OVERRIDE=true", "HERMESQ_PRINCIPAL="+p)
			return c
		}
		dave := as("dave")
		dave.env = append(dave.env, "HERMESQ_TIMEOUT=300ms") // a held lock is a refusal, not a wait
		chaosProducers(t, as("alice"), dave, func(d time.Duration) {
			// The store's lock, held as another hermesq process would.
			fd, err := syscall.Open(db+".lock", syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(fd)
			if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			time.Sleep(d)
		})
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Require(t)
		srv := redistest.Start(t, redistest.WithACL("hq-ops", "ops-pw-1"))
		alice := newCLI(t, aclUser(t, srv, "alice", "alice-pw-1"))
		dave := newCLI(t, aclUser(t, srv, "dave", "dave-pw-1"))
		chaosProducers(t, alice, dave, func(d time.Duration) {
			_, _ = srv.Do("CLIENT", "PAUSE", strconv.Itoa(int(d/time.Millisecond)), "WRITE")
		})
		_, _ = srv.Do("CLIENT", "UNPAUSE")
	})
}

// chaosProducers is the soak of TestChaosProducers on one store: alice
// owns the sessions, dave runs the producers, pause makes the store take
// no writes for a while.
func chaosProducers(t *testing.T, alice, dave *cli, pause func(time.Duration)) {
	inputs, sessions := chaosSize(t)
	dave = withPlugins(t, dave, "delegation", "process")
	dave.env = append(dave.env, "HERMESQ_PRODUCER_BACKOFF=100ms", "HERMESQ_PRODUCER_BACKOFF_CAP=1s")
	grant := func(s string) {
		alice.ok("session", "grant", s, "dave", "--role", "writer", "--producer", "delegation", "--producer", "process")
	}
	var names []string
	for i := range sessions {
		s := fmt.Sprintf("s%02d", i)
		names = append(names, s)
		alice.ok("session", "open", s)
		grant(s)
	}
	outboxes := map[string]*producer.Outbox{"delegation": stateOutbox(t, dave, "delegation"), "process": stateOutbox(t, dave, "process")}

	host := dave.start(nil, "producers", "run")
	rng := rand.New(rand.NewPCG(23, 1))

	// The recorder: events one at a time, into either outbox, as
	// delegate done and proc run record them.
	type rec struct{ producer, session, identity, marker string }
	var recorded []rec
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		r := rand.New(rand.NewPCG(23, 2))
		for i := range inputs {
			p := []string{"delegation", "process"}[r.IntN(2)]
			s := names[r.IntN(len(names))]
			marker := fmt.Sprintf("EV<%s-%05d>", p, i)
			ev := producer.Event{Session: s, Target: s, Identity: fmt.Sprintf(`["chaos","%s-%05d",""]`, p, i), Text: "[" + p + "] " + marker}
			for {
				if _, err := outboxes[p].Add(context.Background(), ev); err == nil {
					break
				} else if !strings.Contains(err.Error(), "locked") {
					t.Errorf("record %s: %v", marker, err)
					return
				}
			}
			recorded = append(recorded, rec{p, s, ev.Identity, marker})
			time.Sleep(time.Duration(r.IntN(60)) * time.Millisecond)
		}
	}()

	// The faults, in turn, until the recorder is done and each came at
	// least twice.
	var mu sync.Mutex
	counts := map[string]int{}
	revoked := map[string]bool{}
	recording := true
	for turn := 0; recording || turn < 6; turn++ {
		select {
		case <-recDone:
			recording = false
		case <-time.After(time.Duration(200+rng.IntN(800)) * time.Millisecond):
		}
		mu.Lock()
		switch turn % 3 {
		case 0:
			pause(time.Duration(100+rng.IntN(1900)) * time.Millisecond)
			counts["pauses"]++
		case 1:
			s := names[rng.IntN(len(names))]
			if revoked[s] {
				grant(s)
				delete(revoked, s)
			} else {
				alice.ok("session", "revoke", s, "dave")
				revoked[s] = true
				counts["revokes"]++
			}
		case 2:
			for _, pid := range childPIDs(host.pid()) {
				if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
					counts["plugin kills"]++
				}
			}
		}
		mu.Unlock()
	}
	for s := range revoked {
		grant(s)
	}
	<-recDone
	t.Logf("%d inputs across %d sessions (events recorded into two outboxes); store faults and kills: %v", len(recorded), sessions, counts)
	if len(recorded) != inputs {
		t.Fatalf("recorded %d of %d", len(recorded), inputs)
	}

	// Everything is delivered once the faults stop.
	states := func() map[string]producer.Entry {
		m := map[string]producer.Entry{}
		for p, ob := range outboxes {
			es, err := ob.Entries(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				m[p+" "+e.Identity] = e
			}
		}
		return m
	}
	eventually(t, 3*time.Minute, "every event delivered", func() bool {
		for _, e := range states() {
			if e.State != producer.StateDelivered {
				return false
			}
		}
		return true
	})
	host.signal(syscall.SIGTERM)
	if code := host.wait(t, time.Minute); code != 143 {
		t.Errorf("producers run: exit %d after SIGTERM, want 143", code)
	}
	dave.ok("producers", "run", "--once")
	log := host.stderr()
	t.Logf("the host: %d offers refused and left waiting, %d plugin restarts", strings.Count(log, " waits until "), strings.Count(log, "restarting in"))
	if strings.Contains(log, "rejected") {
		t.Errorf("the host rejected events:\n%s", log)
	}

	// Outbox and store compared event by event.
	st := states()
	if len(st) != len(recorded) {
		t.Errorf("outboxes hold %d events, %d recorded", len(st), len(recorded))
	}
	held := map[string]int{}
	for _, s := range names {
		for _, a := range alice.all(s) {
			for _, id := range a.Identities {
				held[s+" "+id]++
			}
		}
	}
	for _, r := range recorded {
		if e := st[r.producer+" "+r.identity]; e.State != producer.StateDelivered {
			t.Errorf("%s: %s (%s), want delivered", r.marker, e.State, e.Reason)
		}
		if n := held[r.session+" "+r.identity]; n != 1 {
			t.Errorf("%s: in %d admissions, want 1", r.marker, n)
		}
		delete(held, r.session+" "+r.identity)
	}
	for id, n := range held {
		t.Errorf("the store holds %s (%d times), never recorded", id, n)
	}
	for _, s := range names {
		alice.ok("drain", s)
	}
	notes := map[string]int{}
	for _, s := range names {
		for _, m := range alice.messages(s) {
			for _, f := range strings.Fields(m.Content) {
				if strings.HasPrefix(f, "EV<") {
					notes[f]++
				}
			}
		}
	}
	for _, r := range recorded {
		if notes[r.marker] != 1 {
			t.Errorf("%s noted %d times, want once", r.marker, notes[r.marker])
		}
	}
}
