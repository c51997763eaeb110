package cli

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

func TestExitCode(t *testing.T) {
	run := func(err error) error { return &runError{err} }
	cases := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{run(backend.Errorf(backend.ErrInvalid, "x")), 2},
		{run(backend.Errorf(backend.ErrNotFound, "x")), 3},
		{run(backend.ErrClosed), 4},
		{run(backend.ErrBusy), 4},
		{run(fmt.Errorf("drain: %w", backend.ErrLeaseHeld)), 5},
		{run(backend.ErrFenced), 5},
		{run(backend.ErrAttention), 6},
		{run(backend.ErrForbidden), 7},
		{run(backend.ErrUnavailable), 75},
		{run(backend.ErrInternal), 1},
		{run(errors.New("something unexplained")), 1},
		{errors.New(`unknown command "x" for "hermesq"`), 2},
		{run(&signalError{sig: syscall.SIGINT, op: "drain"}), 130},
		{run(&signalError{sig: syscall.SIGTERM, op: "drain"}), 143},
		{run(&reportedError{backend.Errorf(backend.ErrInvalid, "batch")}), 2},
		{run(errors.Join(backend.ErrAttention, backend.ErrInternal)), 6},
	}
	for _, c := range cases {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// With -o json every error, a signal included, carries a code of the
// contract's closed set (docs/contract.md §11).
func TestErrorCodeClosedSet(t *testing.T) {
	closed := map[string]bool{}
	for _, c := range []backend.Code{backend.CodeInvalid, backend.CodeNotFound, backend.CodeConflict, backend.CodeFenced,
		backend.CodeAttention, backend.CodeForbidden, backend.CodeUnavailable, backend.CodeInternal} {
		closed[string(c)] = true
	}
	run := func(err error) error { return &runError{err} }
	for _, c := range []struct {
		err  error
		want string
	}{
		{run(backend.Errorf(backend.ErrInvalid, "x")), "invalid"},
		{run(backend.ErrClosed), "conflict"},
		{run(fmt.Errorf("drain: %w", backend.ErrLeaseHeld)), "fenced"},
		{run(errors.New("something unexplained")), "internal"},
		{errors.New(`unknown command "x" for "hermesq"`), "invalid"},
		{run(&signalError{sig: syscall.SIGINT, op: "drain"}), "unavailable"},
		{run(&signalError{sig: syscall.SIGTERM, op: "drain"}), "unavailable"},
	} {
		got := errorCode(c.err)
		if got != c.want || !closed[got] {
			t.Errorf("errorCode(%v) = %q, want %q (of the closed set)", c.err, got, c.want)
		}
	}
}
