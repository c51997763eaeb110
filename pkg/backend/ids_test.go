package backend

import (
	"regexp"
	"testing"
	"time"
)

func TestNewAdmissionID(t *testing.T) {
	hexID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	t0 := time.UnixMilli(1_780_000_000_000)
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
	if got, want := NewAdmissionID(t0)[:12], "019e70448800"; got != want {
		t.Errorf("time prefix %s, want %s", got, want)
	}
}
