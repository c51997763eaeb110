package acceptance

import (
	"fmt"
	"sort"
	"sync"
	"testing"
)

// TestConcurrentAdmitProcesses is issue 2, acceptance 3: 8 processes at once,
// each making 200 `hermesq admit` calls in a row, on one bbolt file: exactly
// 1,600 admissions, none lost, none doubled, no call fails, seq strictly
// increasing per session (and, per process and session, in call order).
func TestConcurrentAdmitProcesses(t *testing.T) {
	const (
		procs    = 8
		calls    = 200
		sessions = 4
	)
	c := newCLI(t, storeURLs(t)[0].URL(t))
	for s := 0; s < sessions; s++ {
		c.ok("session", "open", fmt.Sprintf("s%d", s))
	}
	var wg sync.WaitGroup
	failures := make(chan string, procs*calls)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				session := fmt.Sprintf("s%d", (p+i)%sessions)
				r := c.run(nil, "admit", session, "--text", fmt.Sprintf("p%d-i%d", p, i))
				if r.code != 0 {
					failures <- r.String()
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	n := 0
	for f := range failures {
		if n < 5 {
			t.Errorf("admit failed: %s", f)
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of %d admit calls failed", n, procs*calls)
	}

	seen := map[string]int{}
	total := 0
	for s := 0; s < sessions; s++ {
		session := fmt.Sprintf("s%d", s)
		as := c.all(session)
		total += len(as)
		lastByProc := map[int]int{}
		for k, a := range as {
			if k > 0 && a.Seq <= as[k-1].Seq {
				t.Errorf("%s: seq %d after %d, want strictly increasing", session, a.Seq, as[k-1].Seq)
			}
			text := a.Text()
			seen[text]++
			var p, i int
			if _, err := fmt.Sscanf(text, "p%d-i%d", &p, &i); err != nil || (p+i)%sessions != s {
				t.Errorf("%s: unexpected admission %q", session, text)
				continue
			}
			if last, ok := lastByProc[p]; ok && i <= last {
				t.Errorf("%s: process %d's call %d has a lower seq than its call %d", session, p, i, last)
			}
			lastByProc[p] = i
		}
	}
	if total != procs*calls {
		t.Errorf("%d admissions, want %d", total, procs*calls)
	}
	var missing, doubled []string
	for p := 0; p < procs; p++ {
		for i := 0; i < calls; i++ {
			text := fmt.Sprintf("p%d-i%d", p, i)
			switch seen[text] {
			case 1:
			case 0:
				missing = append(missing, text)
			default:
				doubled = append(doubled, text)
			}
		}
	}
	sort.Strings(missing)
	sort.Strings(doubled)
	if len(missing) > 0 || len(doubled) > 0 {
		t.Errorf("lost %d admissions %v; doubled %d %v", len(missing), head(missing), len(doubled), head(doubled))
	}
}

func head(s []string) []string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}
