//go:build linux

package admission

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// The drainer's side of the handler supervisor (supervisor_linux.go): it
// starts the supervisor, asks it to start handlers and hears how they end.

// supervisorStartTimeout bounds the supervisor's start.
const supervisorStartTimeout = 30 * time.Second

// theSupervisor is this process's supervisor, started at the first turn.
var theSupervisor struct {
	mu sync.Mutex
	c  *supervisorClient
}

type supervisorClient struct {
	conn *net.UnixConn
	wmu  sync.Mutex // frames written whole

	mu    sync.Mutex
	dead  error
	next  uint64
	turns map[uint64]*supervisedProc
	ready chan struct{} // closed once the supervisor said it is ready (or died)
}

// supervisedProc is a handler run by the supervisor.
type supervisedProc struct {
	c       *supervisorClient
	id      uint64
	started chan startReply
	done    chan struct{}
	e       procEnd
	out     procOutput
}

type startReply struct {
	why  uint64 // 0: started
	text string
}

// startProc starts a turn's handler under the supervisor.
func startProc(spec procSpec, deadline time.Time) (handlerProc, error) {
	c, err := supervisorFor()
	if err != nil {
		return nil, fmt.Errorf("start the handler supervisor: %s: %w", oneLine(err), backend.ErrInternal)
	}
	return c.start(spec, deadline)
}

// prestartSupervisor starts this process's supervisor in the background, if
// it is not running, so that its start overlaps the claim of the first turn;
// a failure is reported by that turn's start.
func prestartSupervisor() {
	theSupervisor.mu.Lock()
	c := theSupervisor.c
	theSupervisor.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		dead := c.dead
		c.mu.Unlock()
		if dead == nil {
			return
		}
	}
	go func() { _, _ = supervisorFor() }()
}

// supervisorFor returns this process's supervisor, started if need be.
func supervisorFor() (*supervisorClient, error) {
	theSupervisor.mu.Lock()
	defer theSupervisor.mu.Unlock()
	if c := theSupervisor.c; c != nil {
		c.mu.Lock()
		dead := c.dead
		c.mu.Unlock()
		if dead == nil {
			return c, nil
		}
	}
	c, err := startSupervisor()
	if err != nil {
		return nil, err
	}
	theSupervisor.c = c
	return c, nil
}

func startSupervisor() (*supervisorClient, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socketpair", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "supervisor")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, err
	}
	// This very binary, whatever has become of its file since.
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"hermesq-handler-supervisor"}
	cmd.Env = append(os.Environ(), supervisorEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.ExtraFiles = []*os.File{theirs} // supervisorFD
	// Its own process group: the terminal's Ctrl-C and Ctrl-Z, and a
	// kill of the drainer's group, reach the drainer, not the supervisor,
	// which must outlive a stopped drainer and clean up after a dead one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fc.Close()
		return nil, err
	}
	go func() { _ = cmd.Wait() }() // reaped when it ends
	c := &supervisorClient{conn: fc.(*net.UnixConn), turns: map[uint64]*supervisedProc{}, ready: make(chan struct{})}
	go c.read()
	select {
	case <-c.ready:
	case <-time.After(supervisorStartTimeout):
		c.fail(errors.New("not ready in time"))
		_ = cmd.Process.Kill()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		fc.Close()
		return nil, c.dead
	}
	return c, nil
}

// read dispatches the supervisor's frames until it is gone.
func (c *supervisorClient) read() {
	r := newFrameReader(c.conn)
	for {
		body, err := r.frame()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("it exited")
			}
			c.fail(err)
			return
		}
		d := &decoder{b: body[1:]}
		switch body[0] {
		case msgReady:
			close(c.ready)
		case msgStarted, msgStartFailed:
			id := d.u64()
			var rep startReply
			if body[0] == msgStartFailed {
				rep.why, rep.text = d.u64(), d.str()
			}
			if p := c.turn(id, body[0] == msgStartFailed); p != nil {
				select {
				case p.started <- rep:
				default: // fail got there first
				}
			}
		case msgEnded:
			id, ws, at, k, deadline := d.u64(), syscall.WaitStatus(d.u64()), d.i64(), d.u64(), d.i64()
			stdout, over, stderr := d.str(), d.u64(), d.str()
			if d.bad {
				c.fail(errors.New("a bad frame"))
				return
			}
			if p := c.turn(id, true); p != nil {
				p.out = procOutput{stdout: []byte(stdout), over: over == 1, stderr: []byte(stderr)}
				p.e = endOf(ws, time.Unix(0, at))
				p.e.deadlineKill = k == 1
				if deadline != 0 {
					p.e.deadline = time.Unix(0, deadline)
				}
				close(p.done)
			}
		}
	}
}

func endOf(ws syscall.WaitStatus, at time.Time) procEnd {
	e := procEnd{at: at, code: -1}
	switch {
	case ws.Exited():
		e.code = ws.ExitStatus()
		e.status = "exit status " + strconv.Itoa(e.code)
	case ws.Signaled():
		e.signal = ws.Signal()
		e.status = "signal: " + e.signal.String()
		if ws.CoreDump() {
			e.status += " (core dumped)"
		}
	default:
		e.status = "wait status " + strconv.Itoa(int(ws))
	}
	return e
}

// turn returns the handler id names, forgotten when done.
func (c *supervisorClient) turn(id uint64, done bool) *supervisedProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.turns[id]
	if done {
		delete(c.turns, id)
	}
	return p
}

// fail marks the supervisor gone: the handlers it was starting or running
// end, their end unknown.
func (c *supervisorClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return
	}
	c.dead = err
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	for id, p := range c.turns {
		delete(c.turns, id)
		p.e = procEnd{err: fmt.Errorf("%w (%s): the handler was killed with it", errSupervisorLost, oneLine(err))}
		select {
		case p.started <- startReply{why: ^uint64(0)}:
		default:
		}
		close(p.done)
	}
	c.conn.Close()
}

func (c *supervisorClient) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(b)
	return err
}

func (c *supervisorClient) start(spec procSpec, deadline time.Time) (handlerProc, error) {
	var dl int64
	if !deadline.IsZero() {
		dl = deadline.UnixNano()
	}
	// The id is written in once the turn is registered under it.
	f := newFrame(msgStart).u64(0).i64(dl).str(spec.path).str(spec.dir).strs(spec.argv).strs(spec.env).
		str(string(spec.input)).u64(uint64(spec.replyCap)).u64(uint64(spec.tailSize))
	if len(f.b)-4 > maxFrame {
		return nil, fmt.Errorf("the handler's input, arguments and environment are %d bytes, over the %d the supervisor takes: %w", len(f.b)-4, maxFrame, backend.ErrInvalid)
	}
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("the handler supervisor ended (%s): %w", oneLine(c.dead), backend.ErrInternal)
	}
	c.next++
	p := &supervisedProc{c: c, id: c.next, started: make(chan startReply, 1), done: make(chan struct{})}
	c.turns[p.id] = p
	c.mu.Unlock()
	binary.LittleEndian.PutUint64(f.b[5:], p.id)
	if err := c.write(f.bytes()); err != nil {
		c.fail(err)
	}
	rep := <-p.started
	switch rep.why {
	case 0:
		return p, nil
	case startTooLate:
		return nil, fmt.Errorf("%w: %s", errLeaseLost, rep.text)
	case startExecFailed:
		return nil, fmt.Errorf("%s: %w", rep.text, backend.ErrInvalid)
	case startNoPipes:
		return nil, fmt.Errorf("%s: %w", rep.text, backend.ErrInternal)
	default:
		// Whether it was started is not known.
		return nil, p.e.err
	}
}

func (p *supervisedProc) ended() <-chan struct{} { return p.done }
func (p *supervisedProc) end() procEnd           { return p.e }
func (p *supervisedProc) output() procOutput     { return p.out }

func (p *supervisedProc) kill() {
	_ = p.c.write(newFrame(msgKill).u64(p.id).bytes())
}

func (p *supervisedProc) setDeadline(t time.Time) {
	if !t.IsZero() {
		_ = p.c.write(newFrame(msgDeadline).u64(p.id).i64(t.UnixNano()).bytes())
	}
}
