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
// The supervisor also holds the handler's stdin, stdout and stderr: it
// writes the turn's input, keeps the reply (up to the limit the drainer
// gives) and the tail of stderr, and sends them with the handler's end. It
// is one loop in one thread, waiting in ppoll(2) on its socket, each
// handler's pidfd and pipes and the nearest lease deadline, so that a
// handler's end wakes one thread here and one read in the drainer
// (docs/performance.md, "A seventh look").
//
// The drainer and the supervisor speak over a Unix socket pair: frames of a
// little-endian uint32 length and a body whose first byte is its kind. The
// frames are in supervisor_frame_linux.go, the drainer's side in
// supervisor_client_linux.go.

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
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

// unwatchedPoll is how often the end of a handler without a pidfd (a
// kernel before 5.3) is looked for.
const unwatchedPoll = time.Millisecond

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
	fd    int    // the socket, non-blocking
	rbuf  []byte // read, not yet a whole frame
	wq    []byte // frames not yet written
	gone  bool   // the drainer is gone (its socket ended or failed)
	bad   bool   // a frame made no sense: the drainer is not one
	turns map[uint64]*supervised
	// noPidfd: this kernel gives no pidfd; handlers' ends are polled for.
	noPidfd bool
	buf     []byte // for reads of pipes and the socket
	fds     []unix.PollFd
	refs    []pollRef
}

// supervised is one handler the supervisor runs.
type supervised struct {
	id       uint64
	pid      int
	pidfd    int   // -1: none, its end polled for
	deadline int64 // unix ns; 0: none
	// deadlineKill: killed at the deadline, before it was seen to end.
	deadlineKill bool
	exited       bool               // seen to end, its group killed, reaped
	at           int64              // when it was seen to end, unix ns
	ws           syscall.WaitStatus // how
	outputBy     int64              // once exited: when its pipes are closed, ended or not
	in           int                // its stdin, our end; -1 once closed
	input        []byte             // what is left to write to it
	out, err     int                // its stdout and stderr, our ends; -1 once closed
	stdout       capWriter
	stderr       tailWriter
}

// supervise is the supervisor process's life: it serves the drainer on fd
// until the drainer is gone, and returns the exit code.
func supervise(fd int) int {
	// Handlers get SIGKILL when the thread that started them ends (their
	// parent-death signal): they are started from this goroutine, locked to
	// the main thread, which lives as long as the process.
	runtime.LockOSThread()
	// All the work is this loop's, in this thread; a second P lets the
	// runtime's own goroutines (signals, the scavenger) run without taking
	// the loop's P while it waits in ppoll, which it then has to wait to get
	// back: with one P a handler took about 0.3 ms longer to start and be
	// seen to end (BenchmarkSupervisedTrue), and more would only spin.
	runtime.GOMAXPROCS(2)
	// Signals meant for the drainer's terminal or service (Ctrl-C, Ctrl-Z,
	// a stop) are the drainer's to act on: it tells this process what to
	// kill. (Caught, not ignored: an ignored signal would stay ignored in
	// the handlers.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
		syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	syscall.CloseOnExec(fd)
	if syscall.SetNonblock(fd, true) != nil {
		return 1
	}
	s := newSupervisor(fd)
	s.send(newFrame(msgReady).u64(uint64(os.Getpid())))
	for s.step() {
	}
	// The drainer is gone: nothing it started may outlive it.
	s.killAll()
	if s.bad {
		return 1
	}
	return 0
}

func newSupervisor(fd int) *supervisor {
	return &supervisor{fd: fd, turns: map[uint64]*supervised{}, buf: make([]byte, 64<<10)}
}

// step waits for the socket, a handler or a deadline, and does what is
// due; it reports whether the drainer is still there.
func (s *supervisor) step() bool {
	s.fds, s.refs = s.pollSet(s.fds[:0], s.refs[:0])
	if _, err := unix.Ppoll(s.fds, s.timeout(), nil); err != nil && err != unix.EINTR {
		s.bad = true
		return false
	}
	for i, r := range s.refs {
		if s.fds[i].Revents != 0 {
			s.ready(r, s.fds[i].Revents)
		}
	}
	s.tick()
	s.flush()
	return !s.gone && !s.bad
}

// pollRef is what one entry of the poll set stands for.
type pollRef struct {
	t    *supervised // nil: the socket
	what int
}

const (
	pollSocket = iota
	pollPidfd
	pollIn
	pollOut
	pollErr
)

// pollSet lists what the loop waits on: the socket (writable too while
// frames wait), and each handler's pidfd, its stdin while input is left,
// and its stdout and stderr while open.
func (s *supervisor) pollSet(fds []unix.PollFd, refs []pollRef) ([]unix.PollFd, []pollRef) {
	ev := int16(unix.POLLIN)
	if len(s.wq) > 0 {
		ev |= unix.POLLOUT
	}
	fds = append(fds, unix.PollFd{Fd: int32(s.fd), Events: ev})
	refs = append(refs, pollRef{what: pollSocket})
	for _, t := range s.turns {
		if !t.exited && t.pidfd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(t.pidfd), Events: unix.POLLIN})
			refs = append(refs, pollRef{t, pollPidfd})
		}
		if t.in >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(t.in), Events: unix.POLLOUT})
			refs = append(refs, pollRef{t, pollIn})
		}
		if t.out >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(t.out), Events: unix.POLLIN})
			refs = append(refs, pollRef{t, pollOut})
		}
		if t.err >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(t.err), Events: unix.POLLIN})
			refs = append(refs, pollRef{t, pollErr})
		}
	}
	return fds, refs
}

// timeout is how long the loop may wait: until the nearest lease deadline
// of a running handler or output wait of an ended one; nil: no limit.
func (s *supervisor) timeout() *unix.Timespec {
	var next int64
	soon := func(at int64) {
		if at != 0 && (next == 0 || at < next) {
			next = at
		}
	}
	now := time.Now().UnixNano()
	for _, t := range s.turns {
		switch {
		case t.exited:
			soon(t.outputBy)
		case t.pidfd < 0:
			soon(now + int64(unwatchedPoll))
		case !t.deadlineKill:
			soon(t.deadline)
		}
	}
	if next == 0 {
		return nil
	}
	ts := unix.NsecToTimespec(max(next-now, 0))
	return &ts
}

// ready handles one entry of the poll set that is ready.
func (s *supervisor) ready(r pollRef, ev int16) {
	t := r.t
	switch r.what {
	case pollSocket:
		if ev&unix.POLLOUT != 0 {
			s.flush()
		}
		if ev&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0 {
			s.receive()
		}
	case pollPidfd:
		s.reap(t)
	case pollIn:
		s.feed(t)
	case pollOut:
		t.out = s.drainPipe(t.out, &t.stdout)
	case pollErr:
		t.err = s.drainPipe(t.err, &t.stderr)
	}
}

// tick does what time and the handlers' state call for: the kill at a
// passed deadline, looking for the end of handlers without a pidfd, closing
// the pipes of an ended handler whose output wait is over, and the end
// frame of a handler whose output has ended.
func (s *supervisor) tick() {
	now := time.Now().UnixNano()
	for id, t := range s.turns {
		if !t.exited {
			if t.pidfd < 0 {
				s.reap(t)
			}
			if !t.exited && !t.deadlineKill && t.deadline != 0 && now >= t.deadline {
				_ = syscall.Kill(-t.pid, syscall.SIGKILL)
				t.deadlineKill = true
			}
		}
		if !t.exited {
			continue
		}
		if now >= t.outputBy {
			// Only a process that left the group can hold them now: what is
			// in them is taken, without waiting for more.
			t.out = s.drainPipe(t.out, &t.stdout)
			t.err = s.drainPipe(t.err, &t.stderr)
			closeFD(&t.out)
			closeFD(&t.err)
		}
		if t.out >= 0 || t.err >= 0 {
			continue
		}
		closeFD(&t.in)
		delete(s.turns, id)
		k := uint64(0)
		if t.deadlineKill {
			k = 1
		}
		over := uint64(0)
		if t.stdout.over {
			over = 1
		}
		s.send(newFrame(msgEnded).u64(t.id).u64(uint64(t.ws)).i64(t.at).u64(k).i64(t.deadline).
			str(t.stdout.buf.String()).u64(over).str(string(t.stderr.buf)))
	}
}

// receive reads what the drainer sent and handles each whole frame.
func (s *supervisor) receive() {
	for {
		n, err := syscall.Read(s.fd, s.buf)
		if n > 0 {
			s.rbuf = append(s.rbuf, s.buf[:n]...)
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		if err != syscall.EAGAIN {
			s.gone = true // ended (n == 0) or failed
		}
		break
	}
	for !s.bad {
		body, rest, err := cutFrame(s.rbuf)
		if err != nil {
			s.bad = true
		}
		if body == nil {
			break
		}
		s.handle(body)
		s.rbuf = rest
	}
	if len(s.rbuf) == 0 {
		s.rbuf = nil // let a large frame's buffer go
	}
}

// handle acts on one frame from the drainer.
func (s *supervisor) handle(body []byte) {
	d := &decoder{b: body[1:]}
	switch body[0] {
	case msgStart:
		id, deadline := d.u64(), d.i64()
		path, dir, argv, env := d.str(), d.str(), d.strs(), d.strs()
		input, replyCap, tailSize := d.str(), d.u64(), d.u64()
		if d.bad || replyCap > maxFrame || tailSize > maxFrame {
			s.bad = true
			return
		}
		s.start(id, deadline, path, dir, argv, env, []byte(input), int(replyCap), int(tailSize))
	case msgDeadline:
		id, deadline := d.u64(), d.i64()
		if t := s.turns[id]; t != nil && t.deadline != 0 && deadline > t.deadline {
			t.deadline = deadline
		}
	case msgKill:
		if t := s.turns[d.u64()]; t != nil && !t.exited {
			_ = syscall.Kill(-t.pid, syscall.SIGKILL)
		}
	}
}

// start starts a handler, unless its lease deadline has passed.
func (s *supervisor) start(id uint64, deadline int64, path, dir string, argv, env []string, input []byte, replyCap, tailSize int) {
	if deadline != 0 && time.Now().UnixNano() >= deadline {
		s.send(newFrame(msgStartFailed).u64(id).u64(startTooLate).str("the lease deadline passed before the handler started"))
		return
	}
	var p [3][2]int // stdin, stdout, stderr: [0] the read end
	for i := range p {
		if err := syscall.Pipe2(p[i][:], syscall.O_CLOEXEC); err != nil {
			for _, q := range p[:i] {
				syscall.Close(q[0])
				syscall.Close(q[1])
			}
			s.send(newFrame(msgStartFailed).u64(id).u64(startNoPipes).str(os.NewSyscallError("pipe2", err).Error()))
			return
		}
	}
	pid, pidfd, err := s.forkExec(path, dir, argv, env, []int{p[0][0], p[1][1], p[2][1]})
	syscall.Close(p[0][0])
	syscall.Close(p[1][1])
	syscall.Close(p[2][1])
	if err != nil {
		syscall.Close(p[0][1])
		syscall.Close(p[1][0])
		syscall.Close(p[2][0])
		s.send(newFrame(msgStartFailed).u64(id).u64(startExecFailed).str((&os.PathError{Op: "fork/exec", Path: path, Err: err}).Error()))
		return
	}
	for _, fd := range []int{p[0][1], p[1][0], p[2][0]} {
		_ = syscall.SetNonblock(fd, true)
	}
	t := &supervised{id: id, pid: pid, pidfd: pidfd, deadline: deadline, in: p[0][1], input: input,
		out: p[1][0], err: p[2][0], stdout: capWriter{n: replyCap}, stderr: tailWriter{n: tailSize}}
	s.turns[id] = t
	s.send(newFrame(msgStarted).u64(id).u64(uint64(pid)))
	s.feed(t)
}

// forkExec starts the handler in its own process group, dying with this
// thread, with a pidfd where the kernel gives one (-1 where not).
func (s *supervisor) forkExec(path, dir string, argv, env []string, files []int) (pid, pidfd int, err error) {
	attr := &syscall.ProcAttr{Dir: dir, Env: env,
		Files: []uintptr{uintptr(files[0]), uintptr(files[1]), uintptr(files[2])},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	pidfd = -1
	if !s.noPidfd {
		attr.Sys.PidFD = &pidfd
		pid, err = syscall.ForkExec(path, argv, attr)
		if !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EINVAL) {
			if err == nil && pidfd < 0 {
				s.noPidfd = true
			}
			return pid, pidfd, err
		}
		s.noPidfd = true
		attr.Sys.PidFD = nil
		pidfd = -1
	}
	pid, err = syscall.ForkExec(path, argv, attr)
	return pid, -1, err
}

// reap sees whether a handler has ended; if so, it kills what the handler
// left running in its process group, before reaping it (until then its
// pid, and so its group id, cannot be reused), and starts its output wait.
func (s *supervisor) reap(t *supervised) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, t.pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if info.Signo != int32(syscall.SIGCHLD) {
		return // still running
	}
	now := time.Now().UnixNano()
	_ = syscall.Kill(-t.pid, syscall.SIGKILL)
	for {
		_, err := syscall.Wait4(t.pid, &t.ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	t.exited, t.at, t.outputBy = true, now, now+int64(outputWait)
	closeFD(&t.pidfd)
	// What it wrote before it ended is taken at once.
	t.out = s.drainPipe(t.out, &t.stdout)
	t.err = s.drainPipe(t.err, &t.stderr)
}

// feed writes what is left of a handler's input; its stdin is closed once
// all is written, or when it cannot take more (it closed its end).
func (s *supervisor) feed(t *supervised) {
	for t.in >= 0 && len(t.input) > 0 {
		n, err := syscall.Write(t.in, t.input)
		if n > 0 {
			t.input = t.input[n:]
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			return
		}
		break // EPIPE: a handler need not read its input
	}
	t.input = nil
	closeFD(&t.in)
}

// drainPipe reads what is in the pipe fd into w; it returns fd, or -1 once
// the pipe ended (and was closed).
func (s *supervisor) drainPipe(fd int, w io.Writer) int {
	for fd >= 0 {
		n, err := syscall.Read(fd, s.buf)
		if n > 0 {
			_, _ = w.Write(s.buf[:n])
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			return fd
		}
		closeFD(&fd) // ended, or failed
	}
	return fd
}

// send queues a frame for the drainer and writes what it can of the queue.
func (s *supervisor) send(e *encoder) {
	if s.gone {
		return
	}
	s.wq = append(s.wq, e.bytes()...)
	s.flush()
}

// flush writes what the socket takes of the queued frames, never waiting:
// a stopped drainer must not stop this loop.
func (s *supervisor) flush() {
	for len(s.wq) > 0 && !s.gone {
		n, err := unix.SendmsgN(s.fd, s.wq, nil, nil, unix.MSG_NOSIGNAL)
		if n > 0 {
			s.wq = s.wq[n:]
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		if err != syscall.EAGAIN {
			s.gone = true
		}
		return
	}
	if len(s.wq) == 0 {
		s.wq = nil
	}
}

func (s *supervisor) killAll() {
	for _, t := range s.turns {
		if !t.exited {
			_ = syscall.Kill(-t.pid, syscall.SIGKILL)
		}
	}
}

func closeFD(fd *int) {
	if *fd >= 0 {
		syscall.Close(*fd)
		*fd = -1
	}
}
