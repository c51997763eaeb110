package acceptance

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// tickerScript is a handler that appends "ADMISSION PID UNIXNANO" to
// $TICKLOG every 50 ms, $TICKS times, then replies: the ticks of each run
// show when it ran, even when it is killed.
const tickerScript = `cat >/dev/null
i=0
while [ $i -lt "$TICKS" ]; do
	echo "$HERMESQ_ADMISSION $$ $(date +%s%N)" >> "$TICKLOG"
	sleep 0.05
	i=$((i+1))
done
echo "done $HERMESQ_ADMISSION"
`

// handlerRun is one handler process as its ticks show it.
type handlerRun struct {
	admission   string
	pid         string
	first, last int64 // unix ns
}

func readTicks(t *testing.T, file string) []handlerRun {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]*handlerRun{}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue // a line cut by a kill
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		r := runs[f[1]]
		if r == nil {
			r = &handlerRun{admission: f[0], pid: f[1], first: ns}
			runs[f[1]] = r
			order = append(order, f[1])
		}
		r.last = max(r.last, ns)
	}
	out := make([]handlerRun, 0, len(order))
	for _, pid := range order {
		out = append(out, *runs[pid])
	}
	return out
}

// Issue 24 (11): drainer A (--lease 3s) is stopped with SIGSTOP 0.3 s into
// a turn while drainer B waits for the lease. A's handler must not run on
// beside B's: its supervisor kills it when A's lease may lapse, however A
// is scheduled. B then runs the session (FIRST again under --on-unknown
// requeue, then SECOND) and no two handlers' ticks overlap. Continued, A
// says what happened to its handler: killed at the lease deadline, or
// (when it ended first) how and when it ended, its outcome discarded.
func TestFrozenDrainerHandlerNeverOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ticks  int    // A's handler: ticks of 50 ms
		reason string // in A's error
	}{
		{"killed at the lease deadline", 120, "by the handler supervisor, the lease not renewed by"},
		{"ended before the lease lapsed", 12, "handler ended with exit status 0 at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, c *cli) {
				ticks := filepath.Join(c.dir, "ticks")
				h := writeScript(t, c.dir, "ticker", tickerScript)
				first := c.admitHuman("s1", "FIRST")
				second := c.admitHuman("s1", "SECOND")
				a := c.start([]string{"TICKLOG=" + ticks, "TICKS=" + strconv.Itoa(tc.ticks)}, "drain", "s1", "--lease", "3s", "--", h)
				eventually(t, 30*time.Second, "A's handler started", func() bool { return len(readTicks(t, ticks)) > 0 })
				time.Sleep(300 * time.Millisecond)
				a.freeze(t, c)

				b := c.run([]string{"TICKLOG=" + ticks, "TICKS=10"}, "drain", "s1", "--wait", "--on-unknown", "requeue", "--", h)
				if b.code != 0 {
					t.Errorf("drainer B: %v", b)
				}
				for _, id := range []string{first.Admission.ID, second.Admission.ID} {
					if got := c.show(id); got.Outcome != backend.OutcomeCompleted {
						t.Errorf("admission %s after B: %s %q, want completed", id, got.Status, got.Outcome)
					}
				}
				// Whatever A's handler still does shows in its ticks.
				time.Sleep(time.Second)
				runs := readTicks(t, ticks)
				if len(runs) != 3 {
					t.Errorf("%d handler runs %+v, want 3 (A's FIRST, B's FIRST and SECOND)", len(runs), runs)
				}
				sort.Slice(runs, func(i, j int) bool { return runs[i].first < runs[j].first })
				for i := 1; i < len(runs); i++ {
					if prev := runs[i-1]; runs[i].first <= prev.last {
						t.Errorf("handler %s (%s) started %v before handler %s (%s) last ticked: two handlers of s1 ran at once",
							runs[i].pid, runs[i].admission, time.Duration(prev.last-runs[i].first), prev.pid, prev.admission)
					}
				}

				a.signal(syscall.SIGCONT)
				if code := a.wait(t, time.Minute); code != 5 {
					t.Errorf("drainer A: exit %d, want 5\nstderr: %s", code, a.stderr())
				}
				t.Logf("drainer A: %s", strings.TrimSpace(a.stderr()))
				if !strings.Contains(a.stderr(), tc.reason) {
					t.Errorf("drainer A's stderr %q does not say %q", a.stderr(), tc.reason)
				}
				ms := c.messages("s1")
				if len(ms) != 4 || ms[1].Content != "done "+first.Admission.ID || ms[3].Content != "done "+second.Admission.ID {
					t.Errorf("transcript %+v, want B's two turns only", ms)
				}
			})
		})
	}
}
