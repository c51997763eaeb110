//go:build !linux

package admission

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// execProc is a handler started by the drainer itself, where there is no
// handler supervisor (supervisor_linux.go).
type execProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  procOutput

	mu     sync.Mutex
	exited bool
	e      procEnd
}

// startExec starts spec as a child of this process. Its kills are the
// drainer's own: a drainer stopped (SIGSTOP) or starved cannot kill it.
func startExec(spec procSpec) (*execProc, error) {
	pp, err := newProcPipes()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", oneLine(err), backend.ErrInternal)
	}
	cmd := &exec.Cmd{
		Path: spec.path, Args: spec.argv, Env: spec.env, Dir: spec.dir,
		Stdin: pp.childIn, Stdout: pp.childOut, Stderr: pp.childErr,
	}
	setProcessGroup(cmd)
	p := &execProc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		err := cmd.Start()
		pp.closeChild()
		if err != nil {
			pp.closeAll()
			started <- err
			return
		}
		started <- nil
		stdout, stderr := &capWriter{n: spec.replyCap}, &tailWriter{n: spec.tailSize}
		outDone, errDone := pp.read(stdout, stderr)
		go func() {
			_, _ = pp.in.Write(spec.input) // a handler need not read its input
			pp.in.Close()
		}()
		err = cmd.Wait()
		at := time.Now()
		p.mu.Lock()
		// What it left running in its process group (a shell's
		// background job) is killed with it.
		killGroup(cmd)
		p.exited = true
		p.e = procEnd{at: at, code: -1}
		if ps := cmd.ProcessState; ps != nil {
			p.e.status, p.e.code = ps.String(), ps.ExitCode()
			if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.e.signal = ws.Signal()
			}
		} else {
			p.e.err = fmt.Errorf("wait for the handler: %s: %w", oneLine(err), backend.ErrInternal)
		}
		p.mu.Unlock()
		pp.finish(outDone, errDone, outputWait)
		pp.closeAll()
		p.out = procOutput{stdout: stdout.buf.Bytes(), over: stdout.over, stderr: stderr.buf}
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%s: %w", oneLine(err), backend.ErrInvalid)
	}
	return p, nil
}

func (p *execProc) ended() <-chan struct{} { return p.done }
func (p *execProc) end() procEnd           { return p.e }
func (p *execProc) output() procOutput     { return p.out }
func (p *execProc) setDeadline(time.Time)  {}

func (p *execProc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		killGroup(p.cmd)
	}
}

// startProc starts a turn's handler as a child of the drainer: a drainer
// stopped (SIGSTOP) or starved cannot kill it when its lease may lapse,
// and a drainer killed with SIGKILL leaves it running until it exits (its
// admission is then unknown to the next drainer, never settled twice).
func startProc(spec procSpec, deadline time.Time) (handlerProc, error) {
	p, err := startExec(spec)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// prestartSupervisor: there is no supervisor to start.
func prestartSupervisor() {}
