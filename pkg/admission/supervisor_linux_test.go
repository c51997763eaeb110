package admission

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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
	path, err := exec.LookPath("true")
	if err != nil {
		b.Fatalf("no true binary: %v", err)
	}
	env := os.Environ()
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
