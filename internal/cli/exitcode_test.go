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
