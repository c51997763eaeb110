//go:build linux

package admission

// The handler supervisor. A drainer that is stopped (SIGSTOP, a debugger),
// swapped out or starved cannot kill its running handler when its lease may
// lapse, and the next drainer would run the session's next handler beside
// it. So on Linux a handler is not the drainer's child but the child of a
// small supervisor process, the drainer's own binary started again once per
// drainer process (not once per turn) with supervisorEnv set: it starts each
// handler the drainer asks for, with the lease deadline the drainer last
// renewed, and kills the handler's process group when that deadline passes
// before the drainer said otherwise, however the drainer is scheduled. It
// kills every handler it runs, and exits, when the drainer is gone (its
// socket closes: the drainer exited or was killed, even with SIGKILL), and
// a handler dies with it (the parent-death signal) should it be killed.
//
// The drainer and the supervisor speak over a Unix socket pair: frames of a
// little-endian uint32 length and a body whose first byte is its kind. The
// start of a handler carries the handler's stdin, stdout and stderr (the
// pipes the drainer reads) as SCM_RIGHTS.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesq/hermesq/pkg/backend"
)

// supervisorEnv marks the supervisor process; its value is the pid of the
// drainer that started it (anything else is not a supervisor's start, and
// the program runs as itself).
const supervisorEnv = "HERMESQ_HANDLER_SUPERVISOR"

// supervisorFD is the supervisor's end of the socket.
const supervisorFD = 3

func init() {
	v, ok := os.LookupEnv(supervisorEnv)
	if !ok {
		return
	}
	_ = os.Unsetenv(supervisorEnv)
	if v != strconv.Itoa(os.Getppid()) {
		return
	}
	os.Exit(supervise(supervisorFD))
}

// Frame kinds.
const (
	// drainer → supervisor
	msgStart    = 1 // id, deadline, path, dir, argv, env; the 3 pipes
	msgDeadline = 2 // id, deadline (a renewal)
	msgKill     = 3 // id
	// supervisor → drainer
	msgReady       = 10 // pid
	msgStarted     = 11 // id, pid
	msgStartFailed = 12 // id, why, text
	msgEnded       = 13 // id, wait status, when, killed at the deadline, deadline
)

// Why a start failed.
const (
	startExecFailed = 1 // the handler could not be executed
	startTooLate    = 2 // the lease deadline had passed
)

// maxFrame bounds a frame (a handler's argv and environment).
const maxFrame = 64 << 20

type encoder struct{ b []byte }

func newFrame(kind byte) *encoder { return &encoder{b: []byte{0, 0, 0, 0, kind}} }

func (e *encoder) u64(v uint64) *encoder { e.b = binary.LittleEndian.AppendUint64(e.b, v); return e }
func (e *encoder) i64(v int64) *encoder  { return e.u64(uint64(v)) }
func (e *encoder) str(s string) *encoder {
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(s)))
	e.b = append(e.b, s...)
	return e
}

func (e *encoder) strs(ss []string) *encoder {
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
	return e
}

func (e *encoder) bytes() []byte {
	binary.LittleEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) i64() int64 { return int64(d.u64()) }

func (d *decoder) u32() int {
	if v := d.take(4); v != nil {
		return int(binary.LittleEndian.Uint32(v))
	}
	return 0
}

func (d *decoder) str() string { return string(d.take(d.u32())) }

func (d *decoder) strs() []string {
	n := d.u32()
	if n > len(d.b)/4 {
		d.bad = true
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// frameReader reads frames, and the descriptors sent with them, from a
// stream socket: a descriptor arrives no later than the first byte of the
// frame it was sent with.
type frameReader struct {
	conn *net.UnixConn
	buf  []byte
	fds  []int
	rbuf []byte
	oob  []byte
}

func newFrameReader(conn *net.UnixConn) *frameReader {
	return &frameReader{conn: conn, rbuf: make([]byte, 64<<10), oob: make([]byte, syscall.CmsgSpace(16*4))}
}

func (r *frameReader) fill() error {
	n, oobn, flags, _, err := r.conn.ReadMsgUnix(r.rbuf, r.oob)
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(r.oob[:oobn])
		if perr != nil {
			return perr
		}
		for i := range msgs {
			fds, perr := syscall.ParseUnixRights(&msgs[i])
			if perr != nil {
				return perr
			}
			for _, fd := range fds {
				syscall.CloseOnExec(fd)
			}
			r.fds = append(r.fds, fds...)
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 {
		return errors.New("descriptors lost (control message truncated)")
	}
	r.buf = append(r.buf, r.rbuf[:n]...)
	if err == nil && n == 0 {
		err = io.EOF
	}
	return err
}

// frame returns the next frame's body.
func (r *frameReader) frame() ([]byte, error) {
	for {
		if len(r.buf) >= 4 {
			n := int(binary.LittleEndian.Uint32(r.buf))
			if n < 1 || n > maxFrame {
				return nil, fmt.Errorf("bad frame length %d", n)
			}
			if len(r.buf) >= 4+n {
				body := append([]byte(nil), r.buf[4:4+n]...)
				r.buf = r.buf[4+n:]
				return body, nil
			}
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// takeFDs returns the next n descriptors received.
func (r *frameReader) takeFDs(n int) ([]int, error) {
	if len(r.fds) < n {
		return nil, fmt.Errorf("%d descriptors received, %d expected", len(r.fds), n)
	}
	fds := r.fds[:n:n]
	r.fds = r.fds[n:]
	return fds, nil
}

// ---- the supervisor process ----

type supervisor struct {
	conn *net.UnixConn
	wmu  sync.Mutex // frames written whole

	mu    sync.Mutex
	turns map[uint64]*supervised
}

// supervised is one handler the supervisor runs.
type supervised struct {
	id       uint64
	pid      int
	deadline int64 // unix ns; 0: none
	timer    *time.Timer
	exited   bool // seen to end (maybe not reaped yet)
	// deadlineKill: killed at the deadline, before it was seen to end.
	deadlineKill bool
}

// supervise is the supervisor process's life: it serves the drainer on fd
// until the drainer is gone, and returns the exit code.
func supervise(fd int) int {
	// Handlers get SIGKILL when the thread that started them ends (their
	// parent-death signal): they are started from this goroutine, locked to
	// the main thread, which lives as long as the process.
	runtime.LockOSThread()
	// Signals meant for the drainer's terminal or service (Ctrl-C, Ctrl-Z,
	// a stop) are the drainer's to act on: it tells this process what to
	// kill. (Caught, not ignored: an ignored signal would stay ignored in
	// the handlers.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
		syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	f := os.NewFile(uintptr(fd), "hermesq handler supervisor")
	c, err := net.FileConn(f) // a close-on-exec copy
	f.Close()
	if err != nil {
		return 1
	}
	s := &supervisor{conn: c.(*net.UnixConn), turns: map[uint64]*supervised{}}
	if s.send(newFrame(msgReady).u64(uint64(os.Getpid()))) != nil {
		return 1
	}
	r := newFrameReader(s.conn)
	for {
		body, err := r.frame()
		if err != nil {
			// The drainer is gone: nothing it started may outlive it.
			s.killAll()
			return 0
		}
		d := &decoder{b: body[1:]}
		switch body[0] {
		case msgStart:
			id, deadline := d.u64(), d.i64()
			path, dir, argv, env := d.str(), d.str(), d.strs(), d.strs()
			fds, ferr := r.takeFDs(3)
			if d.bad || ferr != nil {
				s.killAll()
				return 1
			}
			s.start(id, deadline, path, dir, argv, env, fds)
		case msgDeadline:
			id, deadline := d.u64(), d.i64()
			s.extend(id, deadline)
		case msgKill:
			s.kill(d.u64())
		}
	}
}

func (s *supervisor) send(e *encoder) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.conn.Write(e.bytes())
	return err
}

// start starts a handler, unless its lease deadline has passed.
func (s *supervisor) start(id uint64, deadline int64, path, dir string, argv, env []string, fds []int) {
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	if deadline != 0 && time.Now().UnixNano() >= deadline {
		_ = s.send(newFrame(msgStartFailed).u64(id).u64(startTooLate).str("the lease deadline passed before the handler started"))
		return
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir: dir, Env: env, Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		_ = s.send(newFrame(msgStartFailed).u64(id).u64(startExecFailed).str((&os.PathError{Op: "fork/exec", Path: path, Err: err}).Error()))
		return
	}
	t := &supervised{id: id, pid: pid, deadline: deadline}
	s.mu.Lock()
	s.turns[id] = t
	if deadline != 0 {
		t.timer = time.AfterFunc(time.Until(time.Unix(0, deadline)), func() { s.expire(t) })
	}
	s.mu.Unlock()
	_ = s.send(newFrame(msgStarted).u64(id).u64(uint64(pid)))
	go s.wait(t)
}

// expire kills the handler's group once its deadline has passed.
func (s *supervisor) expire(t *supervised) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.exited || t.deadlineKill {
		return
	}
	if now := time.Now().UnixNano(); now < t.deadline {
		t.timer.Reset(time.Duration(t.deadline - now)) // renewed meanwhile
		return
	}
	_ = syscall.Kill(-t.pid, syscall.SIGKILL)
	t.deadlineKill = true
}

// extend moves a handler's deadline to a later one.
func (s *supervisor) extend(id uint64, deadline int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.turns[id]; t != nil && t.deadline != 0 && deadline > t.deadline {
		t.deadline = deadline // the timer, when it fires, waits on
	}
}

func (s *supervisor) kill(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.turns[id]; t != nil && !t.exited {
		_ = syscall.Kill(-t.pid, syscall.SIGKILL)
	}
}

func (s *supervisor) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.turns {
		if !t.exited {
			_ = syscall.Kill(-t.pid, syscall.SIGKILL)
		}
	}
}

// wait waits for a handler to end. Its process group is killed before it
// is reaped: until then its pid, and so its group id, cannot be reused.
func (s *supervisor) wait(t *supervised) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, t.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != syscall.EINTR {
			break
		}
	}
	at := time.Now()
	s.mu.Lock()
	t.exited = true
	_ = syscall.Kill(-t.pid, syscall.SIGKILL) // what it left running
	if t.timer != nil {
		t.timer.Stop()
	}
	delete(s.turns, t.id)
	deadlineKill, deadline := t.deadlineKill, t.deadline
	s.mu.Unlock()
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(t.pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	k := uint64(0)
	if deadlineKill {
		k = 1
	}
	_ = s.send(newFrame(msgEnded).u64(t.id).u64(uint64(ws)).i64(at.UnixNano()).u64(k).i64(deadline))
}

// ---- the drainer's side ----

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
			if p := c.turn(id, true); p != nil {
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

func (c *supervisorClient) write(b []byte, fds ...int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	n, _, err := c.conn.WriteMsgUnix(b, oob, nil)
	if err == nil && n < len(b) {
		_, err = c.conn.Write(b[n:])
	}
	return err
}

func (c *supervisorClient) start(spec procSpec, deadline time.Time) (handlerProc, error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("the handler supervisor ended (%s): %w", oneLine(c.dead), backend.ErrInternal)
	}
	c.next++
	p := &supervisedProc{c: c, id: c.next, started: make(chan startReply, 1), done: make(chan struct{})}
	c.turns[p.id] = p
	c.mu.Unlock()
	var dl int64
	if !deadline.IsZero() {
		dl = deadline.UnixNano()
	}
	f := newFrame(msgStart).u64(p.id).i64(dl).str(spec.path).str(spec.dir).strs(spec.argv).strs(spec.env)
	if err := c.write(f.bytes(), int(spec.stdin.Fd()), int(spec.stdout.Fd()), int(spec.stderr.Fd())); err != nil {
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
	default:
		// Whether it was started is not known.
		return nil, p.e.err
	}
}

func (p *supervisedProc) ended() <-chan struct{} { return p.done }
func (p *supervisedProc) end() procEnd           { return p.e }

func (p *supervisedProc) kill() {
	_ = p.c.write(newFrame(msgKill).u64(p.id).bytes())
}

func (p *supervisedProc) setDeadline(t time.Time) {
	if !t.IsZero() {
		_ = p.c.write(newFrame(msgDeadline).u64(p.id).i64(t.UnixNano()).bytes())
	}
}
