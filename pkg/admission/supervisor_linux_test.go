package admission

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startSupervised starts argv under the handler supervisor with deadline.
func startSupervised(t *testing.T, deadline time.Time, argv ...string) (handlerProc, error) {
	t.Helper()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		t.Fatal(err)
	}
	return startProc(procSpec{path: path, argv: argv, env: os.Environ(), replyCap: maxReply, tailSize: stderrTail}, deadline)
}

// waitEnd waits for p to end (a generous bound fails a hung test).
func waitEnd(t *testing.T, p handlerProc) procEnd {
	t.Helper()
	select {
	case <-p.ended():
	case <-time.After(time.Minute):
		p.kill()
		t.Fatal("the handler did not end")
	}
	return p.end()
}

// The supervisor kills a handler whose lease deadline passes, whatever the
// drainer does meanwhile (here: nothing). The deadline leaves the
// supervisor's own start time to spare: under -race on a loaded machine
// that start has taken over 300 ms, and a handler whose deadline passes
// before it starts is refused instead (TestSupervisorRefusesLateStart's
// case, not this one).
func TestSupervisorKillsAtDeadline(t *testing.T) {
	deadline := time.Now().Add(2 * time.Second)
	p, err := startSupervised(t, deadline, "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	e := waitEnd(t, p)
	if !e.deadlineKill || !e.killed() || e.at.Before(deadline) || !e.deadline.Equal(time.Unix(0, deadline.UnixNano())) {
		t.Errorf("end %+v, want killed at the deadline %v", e, deadline)
	}
}

// A renewed deadline reaches the supervisor: a handler running past its
// first deadline is not killed while the drainer keeps renewing.
func TestSupervisorRenewedDeadline(t *testing.T) {
	const window = 2 * time.Second
	first := time.Now().Add(window)
	p, err := startSupervised(t, first, "sleep", "3")
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.setDeadline(time.Now().Add(window))
			continue
		case <-p.ended():
		}
		break
	}
	if e := p.end(); !e.success() || e.deadlineKill {
		t.Errorf("end %+v, want exit status 0 (the deadline was renewed)", e)
	}
}

// No handler starts once its deadline has passed (a drainer stopped between
// its last look at the lease and the start).
func TestSupervisorRefusesLateStart(t *testing.T) {
	_, err := startSupervised(t, time.Now().Add(-time.Millisecond), "true")
	if !errors.Is(err, errLeaseLost) {
		t.Errorf("start after the deadline: %v, want the lease lost", err)
	}
}

// A kill from the drainer kills the handler's process group; a start that
// cannot exec is a configuration error.
func TestSupervisorKillAndExecError(t *testing.T) {
	p, err := startSupervised(t, time.Now().Add(time.Hour), "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	p.kill()
	if e := waitEnd(t, p); !e.killed() || e.deadlineKill {
		t.Errorf("end %+v, want killed by request", e)
	}
	dir := t.TempDir()
	_, err = startSupervised(t, time.Now().Add(time.Hour), "sh", "-c", "true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/noexec", []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = startProc(procSpec{path: dir + "/noexec", argv: []string{"noexec"}}, time.Now().Add(time.Hour))
	if err == nil || !strings.Contains(err.Error(), "fork/exec "+dir+"/noexec: permission denied") {
		t.Errorf("start of a file that cannot be executed: %v", err)
	}
}

// BenchmarkSupervisedTrue starts `true` through the handler supervisor, as
// a turn does (its input written, its stdout and stderr read to their end),
// and waits for its end: beside BenchmarkExecTrue (`true` as this process's
// own child) it is what the supervisor's hop costs a turn, and beside
// BenchmarkDrainTurns what the rest of a turn costs. Run with
//
//	go test -run '^$' -bench 'SupervisedTrue|ExecTrue|DrainTurns' -benchtime 2000x ./pkg/admission/
func BenchmarkSupervisedTrue(b *testing.B) {
	path, env := truePath(b), os.Environ()
	input := []byte(`{"text":"hi"}`)
	for b.Loop() {
		p, err := startProc(procSpec{path: path, argv: []string{"true"}, env: env, input: input,
			replyCap: maxReply, tailSize: stderrTail}, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		<-p.ended()
		if e := p.end(); !e.success() {
			b.Fatalf("true ended with %+v", e)
		}
	}
}

// BenchmarkPipedTrue starts `true` as this process's own child, with the
// three pipes a turn gives its handler read as a turn reads them (a
// goroutine for each of stdout and stderr, through the runtime's poller),
// and waits for its end and the end of its output: no supervisor. Beside
// BenchmarkOneThreadTrue it is what reading the output in goroutines of
// their own costs a turn. Run with
//
//	go test -run '^$' -bench 'True' -benchtime 2000x ./pkg/admission/
func BenchmarkPipedTrue(b *testing.B) {
	path, env := truePath(b), os.Environ()
	for b.Loop() {
		pp, err := newProcPipes()
		if err != nil {
			b.Fatal(err)
		}
		pid, err := syscall.ForkExec(path, []string{"true"}, &syscall.ProcAttr{Env: env,
			Files: []uintptr{pp.childIn.Fd(), pp.childOut.Fd(), pp.childErr.Fd()},
			Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}})
		pp.closeChild()
		if err != nil {
			pp.closeAll()
			b.Fatal(err)
		}
		outDone, errDone := pp.read(io.Discard, io.Discard)
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
			b.Fatalf("true ended with %v, %v", ws, err)
		}
		pp.finish(outDone, errDone, time.Second)
	}
}

// BenchmarkOneThreadTrue starts `true` as BenchmarkPipedTrue does, and
// waits for its end and reads its stdout and stderr to their end in one
// thread: one poll(2) over its pidfd and the two pipes, the pipes blocking
// and outside the runtime's poller. The handler supervisor could watch its
// handlers and their output this way (docs/performance.md, "A seventh
// look").
func BenchmarkOneThreadTrue(b *testing.B) {
	path, env := truePath(b), os.Environ()
	buf := make([]byte, 32<<10)
	for b.Loop() {
		var p [3][2]int
		for i := range p {
			if err := syscall.Pipe2(p[i][:], syscall.O_CLOEXEC); err != nil {
				b.Fatal(err)
			}
		}
		pidfd := -1
		pid, err := syscall.ForkExec(path, []string{"true"}, &syscall.ProcAttr{Env: env,
			Files: []uintptr{uintptr(p[0][0]), uintptr(p[1][1]), uintptr(p[2][1])},
			Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: &pidfd}})
		for _, fd := range []int{p[0][0], p[1][1], p[2][1]} {
			syscall.Close(fd)
		}
		if err != nil {
			b.Fatal(err)
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}, {Fd: int32(p[1][0]), Events: unix.POLLIN}, {Fd: int32(p[2][0]), Events: unix.POLLIN}}
		for open := len(fds); open > 0; {
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				b.Fatal(err)
			}
			for i := range fds {
				if fds[i].Fd < 0 || fds[i].Revents == 0 {
					continue
				}
				if i == 0 {
					var ws syscall.WaitStatus
					if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
						b.Fatalf("true ended with %v, %v", ws, err)
					}
				} else if n, _ := syscall.Read(int(fds[i].Fd), buf); n > 0 {
					continue
				}
				syscall.Close(int(fds[i].Fd))
				fds[i].Fd = -1
				open--
			}
		}
		syscall.Close(p[0][1])
	}
}

func truePath(b *testing.B) string {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Fatalf("no true binary: %v", err)
	}
	return path
}

// loopEnd is a handler's end frame, decoded.
type loopEnd struct {
	ws           syscall.WaitStatus
	deadlineKill bool
	stdout       string
	over         bool
	stderr       string
}

// runLoop drives the supervisor's loop in this process (not in a process of
// its own), over a socket pair, with one handler, and returns the end frame
// the drainer would read.
func runLoop(t *testing.T, noPidfd bool, deadline time.Time, spec procSpec) loopEnd {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "drainer")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frames := make(chan []byte, 2)
	go func() {
		r := newFrameReader(c.(*net.UnixConn))
		for {
			body, err := r.frame()
			if err != nil {
				close(frames)
				return
			}
			frames <- body
		}
	}()
	s := newSupervisor(fds[0])
	s.noPidfd = noPidfd
	var dl int64
	if !deadline.IsZero() {
		dl = deadline.UnixNano()
	}
	s.start(7, dl, spec.path, "", spec.argv, os.Environ(), spec.input, spec.replyCap, spec.tailSize)
	if len(s.turns) != 1 {
		t.Fatal("the handler did not start")
	}
	if s.turns[7].pidfd >= 0 == noPidfd {
		t.Fatalf("pidfd %d with noPidfd %v", s.turns[7].pidfd, noPidfd)
	}
	giveUp := time.Now().Add(time.Minute)
	for len(s.turns) > 0 || len(s.wq) > 0 {
		if !s.step() {
			t.Fatal("the loop ended")
		}
		if time.Now().After(giveUp) {
			s.killAll()
			t.Fatal("the handler did not end")
		}
	}
	if b := <-frames; b[0] != msgStarted {
		t.Fatalf("first frame %d, want started", b[0])
	}
	b := <-frames
	if b[0] != msgEnded {
		t.Fatalf("second frame %d, want ended", b[0])
	}
	d := &decoder{b: b[1:]}
	var e loopEnd
	if id := d.u64(); id != 7 {
		t.Fatalf("end of %d, want 7", id)
	}
	e.ws = syscall.WaitStatus(d.u64())
	_, k, _ := d.i64(), d.u64(), d.i64()
	e.deadlineKill = k == 1
	e.stdout, e.over, e.stderr = d.str(), d.u64() == 1, d.str()
	if d.bad || len(d.b) != 0 {
		t.Fatalf("a bad end frame")
	}
	return e
}

// The supervisor's loop, with and without a pidfd to see a handler's end
// by: the input written whole (more than a pipe holds), stdout kept up to
// the limit and said to be over it, the tail of stderr, the exit status, a
// handler that never reads its input, one that leaves a process holding
// its stdout (read on for outputWait), and the kill at the deadline.
func TestSupervisorLoop(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	input := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
	for _, noPidfd := range []bool{false, true} {
		t.Run(map[bool]string{false: "pidfd", true: "polled"}[noPidfd], func(t *testing.T) {
			run := func(cmd string, in []byte, replyCap, tailSize int, deadline time.Time) loopEnd {
				return runLoop(t, noPidfd, deadline, procSpec{path: sh, argv: []string{"sh", "-c", cmd},
					input: in, replyCap: replyCap, tailSize: tailSize})
			}
			e := run("cat; printf 'no good' >&2; exit 3", input, 2<<20, 100, time.Time{})
			if e.ws.ExitStatus() != 3 || e.stdout != string(input) || e.over || e.stderr != "no good" || e.deadlineKill {
				t.Errorf("cat: exit %d, stdout %d bytes (over %v), stderr %q", e.ws.ExitStatus(), len(e.stdout), e.over, e.stderr)
			}
			e = run("printf 0123456789ABC; printf abcdefghij >&2", nil, 10, 4, time.Time{})
			if e.ws.ExitStatus() != 0 || e.stdout != "0123456789" || !e.over || e.stderr != "ghij" {
				t.Errorf("over the limit: %+v", e)
			}
			e = run("exit 0", input, 10, 4, time.Time{})
			if e.ws.ExitStatus() != 0 || e.stdout != "" || e.over {
				t.Errorf("input not read: %+v", e)
			}
			start := time.Now()
			e = run("setsid sleep 5 & sleep 0.3; echo held", nil, 100, 100, time.Time{})
			if took := time.Since(start); e.stdout != "held\n" || took < outputWait+300*time.Millisecond || took > 4*time.Second {
				t.Errorf("stdout held by a process that left the group: %+v after %v", e, took)
			}
			e = run("sleep 60", nil, 100, 100, time.Now().Add(300*time.Millisecond))
			if !e.deadlineKill || !e.ws.Signaled() || e.ws.Signal() != syscall.SIGKILL {
				t.Errorf("at the deadline: %+v", e)
			}
		})
	}
}
