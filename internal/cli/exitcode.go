package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/backend"
)

// Exit codes of the contract (docs/contract.md §9, `hermesq help exit-codes`).
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitNotFound    = 3
	ExitConflict    = 4
	ExitFenced      = 5
	ExitAttention   = 6
	ExitForbidden   = 7
	ExitProducer    = 8 // producers run: a plugin failed, the others ran
	ExitUnavailable = 75
)

// runError marks an error returned by a command's own code, as opposed to
// one cobra returned while parsing the command line (a usage error).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// signalError reports a command stopped by a signal (drain: SIGINT → 130,
// SIGTERM → 143). Its code for -o json is "unavailable", the closest of the
// contract's closed set (docs/contract.md §11): the drain stopped taking work, the
// queue is intact, and the same drain may be run again later.
type signalError struct {
	sig os.Signal
	op  string
}

func (e *signalError) Error() string {
	return fmt.Sprintf("%s interrupted by %s", e.op, signalName(e.sig))
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// reportedError is an error whose details the command already printed on
// stderr (admit --batch reports each bad line): it only sets the exit code.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// severity orders the codes of failed parts of one command (admit --batch
// lines) for its exit code, the worst line's: a failure of hermesq itself
// first, then the store unavailable (retry later), then refusals of the
// lines by the contract, the invalid input last.
var severity = map[backend.Code]int{
	backend.CodeInternal:    7,
	backend.CodeUnavailable: 6,
	backend.CodeFenced:      5,
	backend.CodeForbidden:   4,
	backend.CodeConflict:    3,
	backend.CodeNotFound:    2,
	backend.CodeInvalid:     1,
}

// worseError returns the worse of two errors by severity (a when equal,
// so the first of equals is kept); either may be nil.
func worseError(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case severity[backend.CodeOf(b)] > severity[backend.CodeOf(a)]:
		return b
	}
	return a
}

// ExitCode maps an error to the process exit code: the one place where
// the contract's mapping lives.
func ExitCode(err error) int {
	var sig *signalError
	var run *runError
	var check *checkStatus
	var prod *producersFailedError
	sigErr := errors.As(err, &sig)
	code := backend.CodeOf(err)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &check):
		// check speaks the Nagios plugin conventions instead.
		return int(check.state)
	case sigErr:
		if s, ok := sig.sig.(syscall.Signal); ok {
			return 128 + int(s)
		}
		return ExitFailure
	case errors.As(err, &prod):
		return ExitProducer
	case !errors.As(err, &run):
		// cobra's own errors: unknown command or flag, wrong arguments,
		// a required flag missing.
		return ExitUsage
	case code == backend.CodeInvalid:
		return ExitUsage
	case code == backend.CodeNotFound:
		return ExitNotFound
	case code == backend.CodeConflict:
		return ExitConflict
	case code == backend.CodeFenced:
		return ExitFenced
	case code == backend.CodeAttention:
		return ExitAttention
	case code == backend.CodeForbidden:
		return ExitForbidden
	case code == backend.CodeUnavailable:
		return ExitUnavailable
	default:
		return ExitFailure
	}
}

// errorCode is the contract's code of an error for -o json: always one of
// the closed set of docs/contract.md §11 (backend.Code).
func errorCode(err error) string {
	var sig *signalError
	var run *runError
	switch {
	case errors.As(err, &sig):
		return string(backend.CodeUnavailable)
	case !errors.As(err, &run):
		return string(backend.CodeInvalid)
	}
	return string(backend.CodeOf(err))
}

// Exit prints err on stderr (one line, or one JSON object with -o json),
// closes the store and returns the exit code. main calls it with what the
// root command's Execute returned.
func (f *Factory) Exit(err error) int {
	if cerr := f.Close(); cerr != nil && err == nil {
		err = &runError{fmt.Errorf("close store: %w", cerr)}
	}
	var rep *reportedError
	if err != nil && !errors.As(err, &rep) {
		printError(f.IO.ErrOut, f.output(), errorCode(err), err.Error())
	}
	return ExitCode(err)
}

// printError writes one diagnostic line: `hermesq: error: …`, or with -o
// json (and jsonl) `{"error":"<code>","message":"…"}`.
func printError(w io.Writer, format, code, msg string) {
	msg = termtext.OneLine(msg)
	if format == formatJSON || format == formatJSONL {
		b, _ := json.Marshal(struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}{code, msg})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	fmt.Fprintf(w, "hermesq: error: %s\n", termtext.Esc(msg))
}
