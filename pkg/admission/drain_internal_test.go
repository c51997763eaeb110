package admission

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// The turn-or-note rule of docs/contract.md §3, as a table.
func TestDecide(t *testing.T) {
	open := backend.Transcript{ID: "t"}
	closed := backend.Transcript{ID: "t", EndedAt: time.Now(), EndReason: "cli_close"}
	human := backend.Admission{Kind: backend.KindHuman}
	auto := backend.Admission{Kind: backend.KindAutomation}
	watched := backend.Session{Viewers: 1}
	alone := backend.Session{}
	cases := []struct {
		name      string
		sess      backend.Session
		a         backend.Admission
		target    backend.Transcript
		misrouted bool
		want      execution
	}{
		{"human, no viewer", alone, human, open, false, execTurn},
		{"human, viewer", watched, human, open, false, execTurn},
		{"automation, viewer, open", watched, auto, open, false, execTurn},
		{"automation, no viewer, open", alone, auto, open, false, execNote},
		{"automation, viewer, closed", watched, auto, closed, false, execNote},
		{"automation, no viewer, closed", alone, auto, closed, false, execNote},
		{"automation, misrouted, viewer", watched, auto, backend.Transcript{}, true, execMisrouted},
		{"automation, misrouted", alone, auto, backend.Transcript{}, true, execMisrouted},
	}
	for _, c := range cases {
		if got := decide(c.sess, c.a, c.target, c.misrouted); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestJoinErrors(t *testing.T) {
	if joinErrors(nil, nil) != nil {
		t.Error("joinErrors of nothing is not nil")
	}
	one := errors.New("one")
	if joinErrors(nil, one) != one {
		t.Error("joinErrors of one error is not that error")
	}
	err := joinErrors(backend.ErrFenced, nil, backend.ErrAttention)
	if !errors.Is(err, backend.ErrFenced) || !errors.Is(err, backend.ErrAttention) {
		t.Errorf("%v does not wrap both", err)
	}
	if strings.Contains(err.Error(), "\n") || err.Error() != "fenced; needs attention" {
		t.Errorf("message %q", err.Error())
	}
	if backend.CodeOf(err) != backend.CodeFenced {
		t.Errorf("code %s, want the first error's", backend.CodeOf(err))
	}
}

func TestBackoff(t *testing.T) {
	var b backoff
	var got []time.Duration
	for i := 0; i < 7; i++ {
		got = append(got, b.next())
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoff %v, want %v", got, want)
		}
	}
	b.reset()
	if d := b.next(); d != backoffMin {
		t.Errorf("after reset: %s", d)
	}
}

func TestTailWriter(t *testing.T) {
	w := &tailWriter{n: 5}
	w.Write([]byte("abc"))
	w.Write([]byte("defgh"))
	if tailText(w.buf) != "defgh" {
		t.Errorf("tail %q, want defgh", tailText(w.buf))
	}
}
