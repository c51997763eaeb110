package backend

import (
	"regexp"
	"sync"
	"testing"
	"time"
)

func TestNewAdmissionID(t *testing.T) {
	hexID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	t0 := time.UnixMilli(4_000_000_000_000) // after any other test's times: ids never go back
	seen := map[string]bool{}
	var maxPrev, maxCur string // largest id of the previous and of this millisecond
	for i := 0; i < 1000; i++ {
		if i%10 == 0 {
			maxPrev, maxCur = maxCur, ""
		}
		id := NewAdmissionID(t0.Add(time.Duration(i/10) * time.Millisecond))
		if !hexID.MatchString(id) {
			t.Fatalf("id %q is not 32 lower-case hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %s made twice", id)
		}
		seen[id] = true
		// Every id of a later millisecond sorts after every id of an
		// earlier one.
		if id <= maxPrev {
			t.Fatalf("id %s sorts before %s, made a millisecond earlier", id, maxPrev)
		}
		if id > maxCur {
			maxCur = id
		}
	}
	// The first 48 bits are the Unix milliseconds.
	if got, want := NewAdmissionID(t0.Add(time.Hour))[:12], "03a352cb2e80"; got != want {
		t.Errorf("time prefix %s, want %s", got, want)
	}
}

// Ids made one after another in a process sort in the order they were
// made, however many share a millisecond, and from several goroutines at
// once: each is above every id returned before it was asked for.
func TestNewAdmissionIDMonotonic(t *testing.T) {
	prev := NewAdmissionID(time.Time{})
	for i := range 100_000 {
		id := NewAdmissionID(time.Time{})
		if id <= prev {
			t.Fatalf("id %d, %s, sorts before or with %s, made just before it", i, id, prev)
		}
		prev = id
	}
	// A fixed time (one millisecond for all), and the clock going back.
	t0 := time.Now().Add(time.Minute)
	for i := range 1000 {
		id := NewAdmissionID(t0.Add(-time.Duration(i%3) * time.Millisecond))
		if id <= prev {
			t.Fatalf("id %d at a fixed time, %s, sorts before or with %s", i, id, prev)
		}
		prev = id
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for i := range 10_000 {
				id := NewAdmissionID(time.Time{})
				if id <= last {
					t.Errorf("goroutine %d, id %d: %s sorts before or with %s", g, i, id, last)
					return
				}
				last = id
			}
		}()
	}
	wg.Wait()
}
