package process

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Supervised is a command started under supervision: the tail of its
// output is kept, and signals are passed on to it while it is waited for.
type Supervised struct {
	cmd   *exec.Cmd
	tail  *TailBuffer
	PID   int
	Start time.Time
}

// Ended is how a supervised command ended.
type Ended struct {
	// ExitCode is the command's exit code; 128+signal for a command
	// killed by a signal.
	ExitCode   int
	Duration   time.Duration
	OutputTail string // the last tailBytes of stdout and stderr, as written
}

// Start runs argv directly (no shell), keeping the last tailBytes of its
// output. With stdout nil (a detached supervisor, whose own streams go
// nowhere) the command reads no input and its output goes to the tail
// only; otherwise it reads stdin and writes to stdout and stderr as well.
// The error is exec's, unwrapped.
func Start(argv []string, tailBytes int, stdin io.Reader, stdout, stderr io.Writer) (*Supervised, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	tail := NewTailBuffer(tailBytes)
	if stdout == nil {
		cmd.Stdin = nil
		cmd.Stdout, cmd.Stderr = tail, tail
	} else {
		cmd.Stdin = stdin
		cmd.Stdout = io.MultiWriter(stdout, tail)
		cmd.Stderr = io.MultiWriter(stderr, tail)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Supervised{cmd: cmd, tail: tail, PID: cmd.Process.Pid, Start: start}, nil
}

// Wait passes every signal received on sigs on to the command until it
// ends, and returns how it ended. The error is exec's when the command
// could not be waited for (not its non-zero exit, which is in Ended).
func (s *Supervised) Wait(sigs <-chan os.Signal) (Ended, error) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = s.cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	werr := s.cmd.Wait()
	close(done)
	code := 0
	var exitErr *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &exitErr):
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	default:
		return Ended{}, werr
	}
	return Ended{ExitCode: code, Duration: time.Since(s.Start), OutputTail: s.tail.String()}, nil
}
