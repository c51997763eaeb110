package acceptance

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
)

// chaosSize is the chaos test's size: small by default so plain `go test`
// runs it quickly; HERMESQ_CHAOS=1 runs the size (HERMESQ_CHAOS_INPUTS
// inputs, default 2000, across 20 sessions).
func chaosSize(t *testing.T) (inputs, sessions int) {
	if os.Getenv("HERMESQ_CHAOS") != "1" {
		return 200, 5
	}
	inputs = 2000
	if v := os.Getenv("HERMESQ_CHAOS_INPUTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HERMESQ_CHAOS_INPUTS=%q", v)
		}
		inputs = n
	}
	return inputs, 20
}

// TestChaos is issue 3, acceptance 4: mixed human and automation inputs
// across sessions while drainers (`drain --all --follow --on-unknown
// requeue`) are killed with SIGKILL at random moments and restarted. At the
// end every admission completed, each note exactly once, each turn's reply
// exactly once in its transcript and its handler run at least once (more
// than once only when the drainer running it was killed), each transcript in
// its session's FIFO order, nothing lost.
func TestChaos(t *testing.T) {
	inputs, sessions := chaosSize(t)
	for _, st := range storeURLs(t) {
		t.Run(st.Name, func(t *testing.T) { chaos(t, newCLI(t, st.URL(t)), inputs, sessions, nil) })
	}
}

// TestChaosStoreFaults is issue 14's store-fault mode: the same inputs and
// drainers, none of them killed, while Redis pauses writes (CLIENT PAUSE
// WRITE, up to 3 s: past the point where a drainer's 3 s lease could lapse
// unrenewed) or drops every client connection (CLIENT KILL) at random
// moments. At the end: nothing lost, no note or reply written twice, and no
// two handlers of one session ever ran at once (each handler holds a
// per-session lock while it runs and records any overlap; the intervals of
// the runs that logged are checked too). A turn may run again when its
// drainer lost the lease mid-turn (--on-unknown requeue), never at once.
func TestChaosStoreFaults(t *testing.T) {
	inputs, sessions := chaosSize(t)
	srv := redistest.Start(t)
	chaos(t, newCLI(t, withPrefix(t, srv.URL())), inputs, sessions, srv)
}

// storeFault makes one random fault of the Redis srv: writes paused for a
// while, or every client connection dropped.
func storeFault(srv *redistest.Server, rng *rand.Rand) string {
	if rng.IntN(2) == 0 {
		ms := 100 + rng.IntN(2900)
		_, _ = srv.Do("CLIENT", "PAUSE", strconv.Itoa(ms), "WRITE")
		return fmt.Sprintf("pause %dms", ms)
	}
	_, _ = srv.Do("CLIENT", "KILL", "TYPE", "normal")
	return "connections dropped"
}

// chaosPause is the time between two kills (200 ms–1.5 s) or two store
// faults (100–700 ms: the store recovers from each in well under that).
func chaosPause(rng *rand.Rand, storeFaults bool) time.Duration {
	if storeFaults {
		return time.Duration(100+rng.IntN(600)) * time.Millisecond
	}
	return time.Duration(200+rng.IntN(1300)) * time.Millisecond
}

// chaos runs the chaos test on c. With srv nil it kills drainers with
// SIGKILL; with srv it leaves them alone and makes srv fail instead.
func chaos(t *testing.T, c *cli, inputs, sessions int, srv *redistest.Server) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	t.Logf("%d inputs across %d sessions", inputs, sessions)
	name := func(s int) string { return fmt.Sprintf("chaos-%02d", s) }
	for s := 0; s < sessions; s++ {
		c.ok("session", "open", name(s))
		if s%2 == 1 { // a viewer: its completions run as turns
			c.ok("viewer", "add", name(s), "--ttl", "2h")
		}
	}

	// The inputs, in the order each session must see them.
	type input struct {
		line    map[string]any
		session string
		text    string
	}
	all := make([]input, inputs)
	for i := range all {
		s := rng.IntN(sessions)
		in := input{session: name(s)}
		if rng.IntN(2) == 0 {
			in.text = fmt.Sprintf("human %d", i)
			in.line = map[string]any{"session": in.session, "text": in.text, "request_id": fmt.Sprintf("req-%d", i)}
		} else {
			in.text = fmt.Sprintf("[finished] job %d (exit 0)", i)
			in.line = map[string]any{"session": in.session, "text": in.text, "producer": "process",
				"identities": []string{fmt.Sprintf(`["completion","job-%d","1700000000.0"]`, i)}}
		}
		all[i] = in
	}

	// Drainers, killed and restarted by the chaos loop.
	drainArgs := []string{"drain", "--all", "--follow", "--on-unknown", "requeue", "--lease", "3s", "--parallel", "4", "--", "handler"}
	lockDir := t.TempDir()
	env := []string{"HERMESQ_EXAMPLE_SLEEP=10ms", "HERMESQ_EXAMPLE_EXCLUSIVE=" + lockDir}
	var (
		mu       sync.Mutex
		drainers = []*bg{c.start(env, drainArgs...), c.start(env, drainArgs...)}
		killed   = map[int]bool{} // pids of killed drainers
		started  = map[int]*bg{}  // every drainer, by pid
		faults   = 0              // store faults made (with srv)
	)
	for _, d := range drainers {
		started[d.pid()] = d
	}
	stopKills := make(chan struct{})
	killsDone := make(chan int)
	killRng := rand.New(rand.NewPCG(rng.Uint64(), 11)) // the kill loop's own
	go func() {
		kills := 0
		for {
			select {
			case <-stopKills:
				killsDone <- kills
				return
			case <-time.After(chaosPause(killRng, srv != nil)):
			}
			mu.Lock()
			if srv != nil {
				t.Logf("store fault: %s", storeFault(srv, killRng))
				faults++
				mu.Unlock()
				kills++
				continue
			}
			i := killRng.IntN(len(drainers))
			d := drainers[i]
			killed[d.pid()] = true
			d.signal(syscall.SIGKILL)
			<-d.done
			drainers[i] = c.start(env, drainArgs...)
			started[drainers[i].pid()] = drainers[i]
			mu.Unlock()
			kills++
		}
	}()

	// Admit in small batches, in order, retrying a batch the store refused
	// for now (request ids and identities make a retry idempotent).
	for i := 0; i < len(all); {
		n := min(1+rng.IntN(20), len(all)-i)
		var b strings.Builder
		for _, in := range all[i : i+n] {
			line, _ := json.Marshal(in.line)
			b.Write(line)
			b.WriteByte('\n')
		}
		deadline := time.Now().Add(time.Minute)
		for {
			r := c.runStdin(b.String(), "admit", "--batch", "-")
			if r.code == 0 {
				break
			}
			if r.code != 75 || time.Now().After(deadline) {
				t.Fatalf("admit batch: %v", r)
			}
		}
		i += n
	}

	// Kills go on a little after the last admit (at least minKills in all),
	// then the drainers, left alone, must finish the queues.
	minKills := 3
	if inputs >= 1000 {
		minKills = 10
	}
	if srv != nil {
		minKills *= 4
	}
	total := func() (done int) {
		for s := 0; s < sessions; s++ {
			for _, a := range c.all(name(s)) {
				if a.Status == backend.StatusDone {
					done++
				}
			}
		}
		return done
	}
	killDeadline := time.Now().Add(time.Minute)
	for time.Now().Before(killDeadline) {
		mu.Lock()
		n := len(killed) + faults
		mu.Unlock()
		if n >= minKills || (srv == nil && total() >= inputs) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stopKills)
	kills := <-killsDone
	if srv != nil {
		_, _ = srv.Do("CLIENT", "UNPAUSE")
		t.Logf("store faults (writes paused, connections dropped): %d", kills)
	} else {
		t.Logf("drainers killed with SIGKILL and restarted: %d", kills)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for total() < inputs && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if done := total(); done < inputs {
		t.Errorf("the --follow drainers left %d of %d admissions undone for 3m after the last kill (an expired lease of a killed drainer is never taken over?)", inputs-done, inputs)
	}
	for _, d := range drainers {
		d.signal(syscall.SIGTERM)
		if code := d.wait(t, 2*time.Minute); code != 143 && code != 0 {
			t.Errorf("drainer after SIGTERM: exit %d\nstderr: %s", code, d.stderr())
		}
	}
	if done := total(); done < inputs {
		// Finish them, so the checks below can still look at everything.
		r := c.run(nil, "drain", "--all", "--wait", "--on-unknown", "requeue", "--", "handler")
		t.Logf("a last drain --all: exit %d: %s", r.code, r.stderr)
		if done := total(); done < inputs {
			t.Fatalf("%d of %d admissions done", done, inputs)
		}
	}

	// Check every session against the inputs given to it.
	calls := c.calls()
	runs := map[string][]handlerCall{}
	for _, call := range calls {
		runs[call.Admission.ID] = append(runs[call.Admission.ID], call)
	}
	rerun, turns, notes := 0, 0, 0
	for s := 0; s < sessions; s++ {
		session := name(s)
		var want []string
		for _, in := range all {
			if in.session == session {
				want = append(want, in.text)
			}
		}
		as := c.all(session)
		var got []string
		for _, a := range as {
			got = append(got, a.Text())
			if a.Status != backend.StatusDone || a.Outcome != backend.OutcomeCompleted {
				t.Errorf("%s: admission %s (%q) %s %q, want completed", session, a.ID, a.Text(), a.Status, a.Outcome)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: %d admissions, want %d in input order (lost, doubled or reordered)", session, len(got), len(want))
			continue
		}
		// The transcript is the admissions in seq order: a note, or a turn's
		// input and reply (which saw the notes before it).
		ms := c.messages(session)
		k, notesSoFar := 0, 0
		for ai, a := range as {
			r := runs[a.ID]
			switch a.Mode {
			case backend.ModeNote:
				notes++
				if len(r) != 0 {
					t.Errorf("%s: note %q also ran the handler", session, a.Text())
				}
				if k >= len(ms) || ms[k].Role != backend.RoleNote || ms[k].Content != a.Text() || ms[k].AdmissionID != a.ID {
					t.Errorf("%s: message %d is not the note %q", session, k+1, a.Text())
					if k < len(ms) {
						logAround(t, as, ai, ms, k)
					}
					k = len(ms)
					continue
				}
				notesSoFar++
				k++
			case backend.ModeTurn:
				turns++
				if len(r) == 0 {
					t.Errorf("%s: turn %q completed without a handler run", session, a.Text())
				}
				if len(r) > 1 && srv != nil {
					// No drainer was killed: a turn ran again only after its
					// drainer lost the lease (its run was then cut off, or
					// its settle fenced); never at once (checked below).
					rerun++
				} else if len(r) > 1 {
					rerun++
					// Every run but the settled one had its drainer killed.
					alive := 0
					// A handler whose drainer is not one of ours (its
					// supervisor gone: ppid 1 or a reaper) outlived a
					// drainer killed as it started the handler.
					for _, run := range r {
						if started[run.drainer()] != nil && !killed[run.drainer()] {
							alive++
						}
					}
					if alive > 1 {
						t.Errorf("%s: turn %q (%s) ran %d times, %d of them under drainers never killed:", session, a.Text(), a.ID, len(r), alive)
						for _, run := range r {
							t.Logf("  handler pid %d under drainer %d (killed %v) at epoch %d generation %d, %s to %s",
								run.Handler.PID, run.drainer(), killed[run.drainer()], run.Admission.Epoch, run.Admission.Generation,
								time.Unix(0, run.Handler.StartedAt).Format("15:04:05.000"), time.Unix(0, run.Handler.EndedAt).Format("15:04:05.000"))
							if d := started[run.drainer()]; d != nil {
								t.Logf("  drainer %d stderr:\n%s", run.drainer(), abbrevTail(d.stderr(), 3000))
							}
						}
					}
				}
				reply := fmt.Sprintf("echo: %s (notes seen: %d)", a.Text(), notesSoFar)
				if k+1 >= len(ms) || ms[k].Role != backend.RoleUser || ms[k].Content != a.Text() ||
					ms[k+1].Role != backend.RoleAssistant || ms[k+1].Content != reply {
					t.Errorf("%s: messages %d–%d are not the turn %q / %q", session, k+1, k+2, a.Text(), reply)
					if k < len(ms) {
						logAround(t, as, ai, ms, k)
					}
					k = len(ms)
					continue
				}
				k += 2
			default:
				t.Errorf("%s: admission %q has mode %q", session, a.Text(), a.Mode)
			}
		}
		if k != len(ms) {
			t.Errorf("%s: %d messages, want %d (a note or reply written twice, or out of order)", session, len(ms), k)
		}
	}
	t.Logf("%d turns, %d notes; %d turns ran again after a kill", turns, notes, rerun)
	if srv != nil {
		// How often the lease guard acted: its renewals failing against the
		// stalled store, a drainer stopped counting on its lease (a turn
		// deferred, given back unstarted, or its handler killed).
		lapsed, unstarted := 0, 0
		for _, d := range started {
			e := d.stderr()
			lapsed += strings.Count(e, "not renewed for")
			unstarted += strings.Count(e, "handler not started")
		}
		t.Logf("lease guard: acted %d times, %d turns given back unstarted", lapsed, unstarted)
	}

	// No two handlers of one session ever ran at once: none found another's
	// lock held, and the logged runs of each session do not overlap.
	if b, err := os.ReadFile(filepath.Join(lockDir, "overlaps")); err == nil && len(b) > 0 {
		t.Errorf("handlers of one session ran at once:\n%s", b)
	}
	bySession := map[string][]handlerCall{}
	for _, call := range calls {
		bySession[call.Session] = append(bySession[call.Session], call)
	}
	for session, cs := range bySession {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Handler.StartedAt < cs[j].Handler.StartedAt })
		for i := 1; i < len(cs); i++ {
			if cs[i].Handler.StartedAt < cs[i-1].Handler.EndedAt {
				t.Errorf("%s: handler %d started before handler %d ended", session, cs[i].Handler.PID, cs[i-1].Handler.PID)
			}
		}
	}
}

// logAround logs the admissions around as[ai] and the messages around
// ms[k], where the transcript stopped matching the admissions.
func logAround(t *testing.T, as []backend.Admission, ai int, ms []backend.Message, k int) {
	t.Helper()
	for i := max(0, ai-4); i < min(len(as), ai+5); i++ {
		a := as[i]
		t.Logf("  admission seq %d %s %s %s/%s epoch %d gen %d settled %s: %q",
			a.Seq, a.ID, a.Mode, a.Status, a.Outcome, a.Epoch, a.Generation, a.SettledAt.Format("15:04:05.000000"), a.Text())
	}
	for i := max(0, k-6); i < min(len(ms), k+7); i++ {
		m := ms[i]
		t.Logf("  message %d %s of %s: %q", i+1, m.Role, m.AdmissionID, m.Content)
	}
}

func abbrevTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
