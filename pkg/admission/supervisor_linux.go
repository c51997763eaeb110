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
// pipes the drainer reads) as SCM_RIGHTS. The frames are in
// supervisor_frame_linux.go, the drainer's side in supervisor_client_linux.go.

import (
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	// One P: the supervisor never has work for two threads at once (it
	// waits on the socket, starts a handler, waits for it), and with more
	// its idle threads woke and spun at each of a turn's steps, taking a
	// core from the drainer and the handler on the critical path of every
	// turn (a turn about 6% faster on two cores: docs/performance.md,
	// "Turns (7)"). A deadline still fires while the thread that starts
	// handlers waits in a system call: the runtime hands the P on.
	runtime.GOMAXPROCS(1)
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
