package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// errSupervisorLost: the handler supervisor ended with a handler of this
// drainer started or being started; how the handler ended is not known (it
// was killed with the supervisor).
var errSupervisorLost = fmt.Errorf("the handler supervisor ended: %w", backend.ErrInternal)

// procSpec is a handler process to start.
type procSpec struct {
	path string   // resolved as exec.Command resolves it
	argv []string // argv[0] as given
	env  []string
	dir  string // "": the drainer's working directory
	// input is written to its stdin, which is then closed.
	input []byte
	// replyCap bounds the stdout kept, tailSize the end of stderr kept.
	replyCap, tailSize int
}

// procOutput is what a handler wrote.
type procOutput struct {
	stdout []byte // at most the spec's replyCap bytes
	over   bool   // more than that came
	stderr []byte // its last tailSize bytes
}

// procEnd is how a handler process ended.
type procEnd struct {
	status string // as os.ProcessState says it: "exit status 3", "signal: killed"
	code   int    // exit code, -1 when ended by a signal
	signal syscall.Signal
	at     time.Time // when its end was seen
	// deadlineKill: the handler supervisor killed it at the lease
	// deadline (deadline), the drainer not having renewed it in time.
	deadlineKill bool
	deadline     time.Time
	// err: how it ended is not known (the supervisor was lost).
	err error
}

func (e procEnd) success() bool { return e.err == nil && e.code == 0 }

// killed reports whether it ended by SIGKILL, which no process can catch:
// a kill that reached it, not an exit that raced the kill.
func (e procEnd) killed() bool { return e.err == nil && e.code < 0 && e.signal == syscall.SIGKILL }

// handlerProc is a started handler process.
type handlerProc interface {
	// ended is closed once the process has ended, what was left of its
	// process group was killed, and its stdout and stderr ended or were
	// closed outputWait after.
	ended() <-chan struct{}
	end() procEnd       // once ended
	output() procOutput // once ended
	// kill kills its process group, unless it has ended.
	kill()
	// setDeadline passes a renewed lease deadline on (supervised
	// handlers; a no-op for others).
	setDeadline(time.Time)
}

// turnLease is what a turn's handler knows of its drain lease.
type turnLease struct {
	// fence is done when the drainer can no longer count on its lease.
	fence context.Context
	// deadline is when the lease may lapse unless renewed before; nil:
	// never.
	deadline func() time.Time

	mu   sync.Mutex
	proc handlerProc // once started
}

// start starts the handler under the lease's current deadline. Renewals
// are not held up meanwhile (the supervisor may be starting): one that
// came during the start is passed on after it.
func (l *turnLease) start(spec procSpec) (handlerProc, error) {
	deadline := l.deadlineNow()
	p, err := startProc(spec, deadline)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.proc = p
	l.mu.Unlock()
	if now := l.deadlineNow(); !now.Equal(deadline) {
		p.setDeadline(now)
	}
	return p, nil
}

// renewed passes a renewed lease deadline on to the running handler.
func (l *turnLease) renewed() {
	l.mu.Lock()
	p := l.proc
	l.mu.Unlock()
	if p != nil {
		p.setDeadline(l.deadlineNow())
	}
}

func (l *turnLease) deadlineNow() time.Time {
	if l.deadline == nil {
		return time.Time{}
	}
	return l.deadline()
}

// procPipes are a handler's stdin, stdout and stderr pipes, where the
// drainer starts its handlers itself (proc_exec.go; on Linux the handler
// supervisor makes and reads them).
type procPipes struct {
	in, out, err                *os.File // the drainer's ends
	childIn, childOut, childErr *os.File // the handler's, closed here once it started
}

func newProcPipes() (*procPipes, error) {
	pp := &procPipes{}
	var err error
	if pp.childIn, pp.in, err = os.Pipe(); err != nil {
		return nil, err
	}
	if pp.out, pp.childOut, err = os.Pipe(); err != nil {
		pp.closeAll()
		return nil, err
	}
	if pp.err, pp.childErr, err = os.Pipe(); err != nil {
		pp.closeAll()
		return nil, err
	}
	return pp, nil
}

// closeChild closes the handler's ends (it holds its own copies).
func (pp *procPipes) closeChild() {
	for _, f := range []**os.File{&pp.childIn, &pp.childOut, &pp.childErr} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

func (pp *procPipes) closeAll() {
	pp.closeChild()
	for _, f := range []*os.File{pp.in, pp.out, pp.err} {
		if f != nil {
			f.Close()
		}
	}
}

// read reads stdout into stdout and stderr into stderr until each pipe
// ends (or finish ends it); the channels are closed when each is done.
func (pp *procPipes) read(stdout, stderr io.Writer) (outDone, errDone chan struct{}) {
	outDone, errDone = make(chan struct{}), make(chan struct{})
	go readPipe(pp.out, stdout, outDone)
	go readPipe(pp.err, stderr, errDone)
	return outDone, errDone
}

// finish waits, for at most d, for the handler's stdout and stderr to end
// (a process that left its group may hold them); then it takes what is
// already in them and closes them, and closes stdin. What is written into
// them later is discarded (the writer gets EPIPE or SIGPIPE).
func (pp *procPipes) finish(outDone, errDone chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, p := range []struct {
		f    *os.File
		done chan struct{}
	}{{pp.out, outDone}, {pp.err, errDone}} {
		select {
		case <-p.done:
			continue
		case <-t.C:
			t.Reset(0) // the other pipe is out of time too
		}
		if p.f.SetReadDeadline(time.Now()) == nil {
			<-p.done // the read ends at once, then takes what is buffered
		} else {
			p.f.Close() // cannot be interrupted: let the reader go
		}
	}
	pp.in.Close()
}

// readPipe copies f into w until f ends or its read deadline passes; then
// what is already in the pipe is taken without waiting.
func readPipe(f *os.File, w io.Writer, done chan struct{}) {
	defer close(done)
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		_, _ = w.Write(buf[:n])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			readBuffered(f, w, buf)
			return
		}
		if err != nil {
			return
		}
	}
}
