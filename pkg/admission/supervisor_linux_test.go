package admission

import (
	"errors"
	"io"
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
	pp, err := newProcPipes()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pp.closeAll)
	p, err := startProc(procSpec{path: path, argv: argv, env: os.Environ(), stdin: pp.childIn, stdout: pp.childOut, stderr: pp.childErr}, deadline)
	pp.closeChild()
	return p, err
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
	pp, _ := newProcPipes()
	defer pp.closeAll()
	_, err = startProc(procSpec{path: dir + "/noexec", argv: []string{"noexec"}, stdin: pp.childIn, stdout: pp.childOut, stderr: pp.childErr}, time.Now().Add(time.Hour))
	if err == nil || !strings.Contains(err.Error(), "fork/exec "+dir+"/noexec: permission denied") {
		t.Errorf("start of a file that cannot be executed: %v", err)
	}
}

// BenchmarkSupervisedTrue starts `true` through the handler supervisor, as
// a turn does (its three pipes made, read to their end and closed), and
// waits for its end: beside BenchmarkExecTrue (`true` as this process's
// own child) it is what the supervisor's hop costs a turn, and beside
// BenchmarkDrainTurns what the rest of a turn costs. Run with
//
//	go test -run '^$' -bench 'SupervisedTrue|ExecTrue|DrainTurns' -benchtime 2000x ./pkg/admission/
func BenchmarkSupervisedTrue(b *testing.B) {
	path, env := truePath(b), os.Environ()
	for b.Loop() {
		pp, err := newProcPipes()
		if err != nil {
			b.Fatal(err)
		}
		p, err := startProc(procSpec{path: path, argv: []string{"true"}, env: env,
			stdin: pp.childIn, stdout: pp.childOut, stderr: pp.childErr}, time.Time{})
		pp.closeChild()
		if err != nil {
			pp.closeAll()
			b.Fatal(err)
		}
		outDone, errDone := pp.read(io.Discard, io.Discard)
		<-p.ended()
		pp.finish(outDone, errDone, time.Second)
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
