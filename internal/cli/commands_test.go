package cli

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

// replyHandler writes a handler script that replies "re: <text>" and returns
// its argv.
func replyHandler(t *testing.T, dir string) []string {
	t.Helper()
	p := filepath.Join(dir, "handler.sh")
	writeFile(t, p, `#!/bin/sh
input=$(cat)
text=$(printf '%s' "$input" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p' | tail -n 1)
echo "re: $text"
`)
	if err := os.Chmod(p, 0o700); err != nil {
		t.Fatal(err)
	}
	return []string{p}
}

// Output differs between a terminal and a pipe: JSON is indented on a
// terminal, compact otherwise; long texts in listings are cut on a terminal
// only.
func TestOutputTerminalAndPipe(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("word ", 30) + "end"

	tty := e.runWith("", true, "-o", "json", "admit", "s1", "--text", long)
	pipe := e.runWith("", false, "-o", "json", "admit", "s1", "--text", long+" again")
	if tty.code != 0 || pipe.code != 0 {
		t.Fatalf("exit %d/%d: %s %s", tty.code, pipe.code, tty.err, pipe.err)
	}
	if !strings.Contains(tty.out, "\n  \"result\": \"admitted\"") {
		t.Errorf("-o json on a terminal is not indented:\n%s", tty.out)
	}
	if strings.Count(pipe.out, "\n") != 1 || !strings.HasPrefix(pipe.out, `{"result":"admitted"`) {
		t.Errorf("-o json into a pipe is not one compact line:\n%s", pipe.out)
	}
	// Both decode to the same shape.
	if a, b := decode[admitOut](t, tty), decode[admitOut](t, pipe); a.Admission.Seq != 1 || b.Admission.Seq != 2 {
		t.Errorf("seqs %d %d", a.Admission.Seq, b.Admission.Seq)
	}

	qtty := e.runWith("", true, "queue", "s1")
	qpipe := e.runWith("", false, "queue", "s1")
	if !strings.Contains(qtty.out, "…") || strings.Contains(qtty.out, "end") {
		t.Errorf("queue on a terminal does not cut long texts:\n%s", qtty.out)
	}
	if !strings.Contains(qpipe.out, long) {
		t.Errorf("queue into a pipe cuts texts:\n%s", qpipe.out)
	}
	for _, r := range []result{qtty, qpipe} {
		if !strings.HasPrefix(r.out, "SEQ ") || strings.Count(r.out, "\n") != 3 {
			t.Errorf("queue listing:\n%s", r.out)
		}
	}
	// Listings: -o json is one array, -o jsonl one object a line, an empty
	// listing is [] or nothing.
	if l := decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s1")); len(l) != 2 {
		t.Errorf("json listing has %d elements", len(l))
	}
	if l := decodeLines[admissionOut](t, e.ok("-o", "jsonl", "queue", "s1")); len(l) != 2 {
		t.Errorf("jsonl listing has %d lines", len(l))
	}
	if r := e.ok("-o", "json", "queue", "s1", "--status", "done"); strings.TrimSpace(r.out) != "[]" {
		t.Errorf("empty json listing: %q", r.out)
	}
	if r := e.ok("-o", "jsonl", "queue", "s1", "--status", "done"); r.out != "" {
		t.Errorf("empty jsonl listing: %q", r.out)
	}
	// stdin on a terminal is not read: admit without text says so.
	r := e.runWith("", true, "admit", "s1").wantExit(t, ExitUsage)
	contains(t, "stderr", r.err, "--text")
}

// --help, help topics and completion never open the store (here: a corrupt
// file, and a path whose directory must not be created).
func TestHelpAndCompletionNeverOpenStore(t *testing.T) {
	e := newEnv(t)
	corrupt := filepath.Join(e.dir, "corrupt.db")
	writeFile(t, corrupt, "garbage")
	for _, store := range []string{"bbolt://" + corrupt, "bbolt://" + filepath.Join(e.dir, "absent", "x.db"), "nosuch://x"} {
		for _, args := range [][]string{
			{"--help"}, {"admit", "--help"}, {"drain", "-h"}, {"session", "close", "--help"},
			{"help"}, {"help", "admit"}, {"help", "session", "close"}, {"help", "exit-codes"},
			{"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}, {"completion", "powershell"},
			{"__complete", "session", "close", "s1", "--reason", ""},
			{"__complete", "help", "ex"},
		} {
			r := e.run(append([]string{"--store", store}, args...)...)
			if r.code != 0 || r.out == "" {
				t.Errorf("hermesq %s: exit %d, stdout %d bytes, stderr %s", strings.Join(args, " "), r.code, len(r.out), r.err)
			}
		}
	}
	if b, _ := os.ReadFile(corrupt); string(b) != "garbage" {
		t.Error("corrupt store file touched")
	}
	if _, err := os.Stat(filepath.Join(e.dir, "absent")); !os.IsNotExist(err) {
		t.Error("store directory created by help or completion")
	}

	r := e.ok("help", "exit-codes")
	for _, code := range []string{"0 ", "1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "7 ", "75 ", "130 ", "143 "} {
		contains(t, "help exit-codes", r.out, "\n  "+code)
	}
	if r := e.ok("__complete", "session", "close", "s1", "--reason", "tui"); !strings.Contains(r.out, "tui_close\ntui_shutdown\n") {
		t.Errorf("--reason completion:\n%s", r.out)
	}
	if r := e.ok("__complete", "help", "ex"); !strings.Contains(r.out, "exit-codes") {
		t.Errorf("help topic completion:\n%s", r.out)
	}
	e.run("help", "nosuch").wantExit(t, ExitUsage)
	e.run("help", "exit-codes", "extra").wantExit(t, ExitUsage)
}

// drain executes in FIFO order, prints one line per executed admission
// (text) or the report (json), and automation input nobody watches becomes
// a note without a handler call.
func TestDrain(t *testing.T) {
	e := newEnv(t)
	h := replyHandler(t, e.dir)
	a1 := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "first"))
	a2 := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--producer", "process", "--identity", "p:1", "--text", "[finished] make (exit 0)"))
	a3 := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "third"))

	r := e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	want := "turn " + a1.Admission.ID + " seq 1 -> s1\n" +
		"note " + a2.Admission.ID + " seq 2 -> s1\n" +
		"turn " + a3.Admission.ID + " seq 3 -> s1\n"
	if r.out != want {
		t.Fatalf("drain text:\n%s\nwant:\n%s", r.out, want)
	}
	tr := e.ok("transcript", "--session", "s1")
	wantTr := "[1] user: first\n[2] assistant: re: first\n[3] note: [finished] make (exit 0)\n[4] user: third\n[5] assistant: re: third\n"
	if tr.out != wantTr {
		t.Fatalf("transcript:\n%s\nwant:\n%s", tr.out, wantTr)
	}
	msgs := decode[[]map[string]any](t, e.ok("-o", "json", "transcript", "s1"))
	if len(msgs) != 5 || msgs[2]["role"] != "note" || msgs[2]["admission_id"] != a2.Admission.ID {
		t.Fatalf("transcript json: %v", msgs)
	}

	// Nothing left: exit 0, nothing printed.
	if r := e.ok(append([]string{"drain", "s1", "--"}, h...)...); r.out != "" {
		t.Fatalf("empty drain printed %q", r.out)
	}

	// -o json: the report with "executed"; several sessions → an array.
	e.ok("admit", "s2", "--text", "hello")
	e.ok("admit", "s3", "--text", "hi")
	rep := decode[map[string]any](t, e.ok(append([]string{"-o", "json", "drain", "s2", "--"}, h...)...))
	if rep["session"] != "s2" || len(rep["executed"].([]any)) != 1 || rep["turns"].(float64) != 1 {
		t.Fatalf("drain report: %v", rep)
	}
	e.ok("admit", "s2", "--text", "again")
	reps := decode[[]map[string]any](t, e.ok(append([]string{"-o", "json", "drain", "s2", "s3", "--"}, h...)...))
	if len(reps) != 2 || reps[0]["session"] != "s2" || reps[1]["session"] != "s3" {
		t.Fatalf("drain reports: %v", reps)
	}

	// --all with --max: every session with work, at most N each.
	for i := 0; i < 3; i++ {
		e.ok("admit", "s4", "--text", "x")
		e.ok("admit", "s5", "--text", "y")
	}
	r = e.ok(append([]string{"drain", "--all", "--max", "2", "--parallel", "2", "--"}, h...)...)
	if strings.Count(r.out, "turn ") != 4 {
		t.Fatalf("drain --all --max 2:\n%s", r.out)
	}
	left := decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s4", "--status", "queued"))
	if len(left) != 1 {
		t.Fatalf("s4 has %d queued after --max 2, want 1", len(left))
	}

	// A failing handler: the turn fails, exit 6, the text says failed.
	e.ok("admit", "s6", "--text", "boom")
	r = e.run("drain", "s6", "--", "sh", "-c", "cat >/dev/null; echo oops >&2; exit 3")
	r.wantExit(t, ExitAttention)
	if !strings.HasPrefix(r.out, "failed ") {
		t.Fatalf("failed turn line: %q", r.out)
	}
}

// Lease held by another drainer → exit 5 at once; an unknown admission
// pauses the queue (exit 6) until resolve.
func TestDrainLeaseAndUnknown(t *testing.T) {
	e := newEnv(t)
	h := replyHandler(t, e.dir)
	a := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "one"))

	ctx := context.Background()
	st, err := boltstore.Open(ctx, strings.TrimPrefix(e.store, "bbolt://"), backend.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A drainer that claimed the admission and then vanished.
	now := time.Now()
	l, err := st.AcquireLease(ctx, backend.LeaseRequest{Principal: boltstore.OSUser(), Session: "s1", Holder: "ghost", TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, backend.ClaimRequest{Session: "s1", AdmissionID: a.Admission.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1", Now: now}); err != nil {
		t.Fatal(err)
	}
	r := e.run(append([]string{"drain", "s1", "--"}, h...)...).wantExit(t, ExitFenced)
	contains(t, "stderr", r.err, "lease")
	// A drain that never took the lease has no report: stdout stays empty.
	for _, o := range []string{"json", "jsonl"} {
		r = e.run(append([]string{"-o", o, "drain", "s1", "--"}, h...)...).wantExit(t, ExitFenced)
		contains(t, "stderr", r.err, `{"error":"fenced"`)
		if r.out != "" {
			t.Fatalf("-o %s drain with the lease held: stdout %q, want empty", o, r.out)
		}
	}
	if r = e.run(append([]string{"-o", "json", "drain", "s1", "s2", "--"}, h...)...).wantExit(t, ExitFenced); strings.TrimSpace(r.out) != "[]" {
		t.Fatalf("-o json drain s1 s2 with s1's lease held and s2 unknown: stdout %q, want []", r.out)
	}
	// Its lease expires: the next drainer recovers the admission as
	// unknown and pauses on it.
	l2, err := st.AcquireLease(ctx, backend.LeaseRequest{Principal: boltstore.OSUser(), Session: "s1", Holder: "ghost2", TTL: time.Minute, Now: now.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(l2.Recovered) != 1 {
		t.Fatalf("recovered %v", l2.Recovered)
	}
	if err := st.ReleaseLease(ctx, backend.LeaseRequest{Session: "s1", Holder: "ghost2", Epoch: l2.Epoch}); err != nil {
		t.Fatal(err)
	}
	r = e.run(append([]string{"drain", "s1", "--"}, h...)...).wantExit(t, ExitAttention)
	contains(t, "stderr", r.err, a.Admission.ID)
	if s := decode[map[string]any](t, e.ok("-o", "json", "session", "show", "s1")); s["state"] != "paused" {
		t.Fatalf("session state %v, want paused", s["state"])
	}
	e.run("cancel", a.Admission.ID).wantExit(t, ExitConflict)
	r = e.ok("resolve", a.Admission.ID, "--as", "requeue")
	contains(t, "resolve", r.out, "resolved "+a.Admission.ID+" as requeue")
	e.run("resolve", a.Admission.ID, "--as", "completed").wantExit(t, ExitConflict)
	r = e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	if !strings.HasPrefix(r.out, "turn "+a.Admission.ID) {
		t.Fatalf("drain after resolve: %q", r.out)
	}
}

// SIGINT and SIGTERM stop a drain: the running turn gets the grace, then
// the drain exits 130 or 143.
func TestDrainSignals(t *testing.T) {
	for _, c := range []struct {
		sig    syscall.Signal
		code   int
		output string
	}{{syscall.SIGINT, 130, "text"}, {syscall.SIGTERM, 143, "json"}, {syscall.SIGINT, 130, "jsonl"}} {
		t.Run(c.sig.String()+"/"+c.output, func(t *testing.T) {
			e := newEnv(t)
			sigs := make(chan os.Signal, 1)
			e.configure = func(f *Factory) {
				f.Signals = func(...os.Signal) (<-chan os.Signal, func()) { return sigs, func() {} }
			}
			marker := filepath.Join(e.dir, "started")
			e.ok("admit", "s1", "--text", "slow")
			done := make(chan result, 1)
			go func() {
				done <- e.run("-o", c.output, "drain", "s1", "--grace", "50ms", "--", "sh", "-c", "cat >/dev/null; touch "+marker+"; exec sleep 60")
			}()
			waitFor(t, func() bool { _, err := os.Stat(marker); return err == nil }, done)
			sigs <- c.sig
			r := <-done
			if r.code != c.code {
				t.Fatalf("drain interrupted by %v: exit %d, want %d\nstdout: %s\nstderr: %s", c.sig, r.code, c.code, r.out, r.err)
			}
			checkOneErrorLine(t, r)
			contains(t, "stderr", r.err, "interrupted")
			if c.output != "text" {
				// The error object's code is one of the closed set; stdout
				// is the report of what was executed, pure JSON.
				contains(t, "stderr", r.err, `{"error":"unavailable","message":"drain interrupted by `)
				if rep := decode[map[string]any](t, r); rep["session"] != "s1" {
					t.Fatalf("report on stdout: %v", rep)
				}
			}
			// The lease was given up: a new drain can start at once.
			e.configure = nil
			e.run("drain", "s1", "--", "true").wantExit(t, 0)
		})
	}
}

// waitFor polls cond until it holds; it fails if done delivers first (the
// command ended early) or after a generous bound.
func waitFor(t *testing.T, cond func() bool, done <-chan result) {
	t.Helper()
	for i := 0; i < 6000; i++ {
		if cond() {
			return
		}
		select {
		case r := <-done:
			t.Fatalf("command ended before the condition held: exit %d\n%s\n%s", r.code, r.out, r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("condition never held")
}

// session open|show|close|compress|switch|grant and sessions.
func TestSessionCommands(t *testing.T) {
	e := newEnv(t)
	t.Setenv("HERMESQ_PRINCIPAL_OVERRIDE", "true")
	if r := e.ok("--principal", "alice", "session", "open", "s1"); r.out != "opened s1 (owner alice, transcript s1)\n" {
		t.Fatalf("open: %q", r.out)
	}
	if r := e.ok("--principal", "bob", "session", "open", "s1"); r.out != "exists s1 (owner alice, transcript s1)\n" {
		t.Fatalf("open again: %q", r.out)
	}
	s := decode[map[string]any](t, e.ok("-o", "json", "--principal", "alice", "session", "show", "s1"))
	if s["owner"] != "alice" || s["state"] != "idle" || s["current_transcript"] != "s1" {
		t.Fatalf("show: %v", s)
	}
	r := e.ok("--principal", "alice", "session", "show", "s1")
	contains(t, "show", r.out, "owner:              alice\n")

	// Only the owner (or a grantee) admits; only the owner grants.
	e.run("--principal", "bob", "admit", "s1", "--text", "hi").wantExit(t, ExitForbidden)
	e.run("--principal", "bob", "session", "grant", "s1", "bob").wantExit(t, ExitForbidden)
	e.ok("--principal", "alice", "session", "grant", "s1", "bob")
	a := decode[admitOut](t, e.ok("-o", "json", "--principal", "bob", "admit", "s1", "--text", "hi"))
	// A writer does not operate: close, cancel, compress, switch are the owner's.
	e.run("--principal", "bob", "session", "close", "s1", "--reason", "cli_close").wantExit(t, ExitForbidden)
	e.run("--principal", "bob", "cancel", a.Admission.ID).wantExit(t, ExitForbidden)
	e.run("--principal", "bob", "session", "compress", "s1").wantExit(t, ExitForbidden)
	e.run("--principal", "bob", "session", "switch", "s1", "--transcript", "x").wantExit(t, ExitForbidden)
	t.Setenv("HERMESQ_PRINCIPAL", "alice") // the owner from here on

	// close while busy → 4; after cancelling, close works; a closed session
	// refuses human input unless --reopen.
	e.run("session", "close", "s1", "--reason", "cli_close").wantExit(t, ExitConflict)
	r = e.ok("cancel", a.Admission.ID)
	contains(t, "cancel", r.out, "cancelled "+a.Admission.ID)
	e.run("cancel", a.Admission.ID).wantExit(t, ExitConflict)
	r = e.ok("session", "close", "s1", "--reason", "cli_close")
	if r.out != "closed s1 (transcript s1, cli_close)\n" {
		t.Fatalf("close: %q", r.out)
	}
	e.run("session", "close", "s1", "--reason", "cli_close").wantExit(t, ExitConflict)
	if s := decode[map[string]any](t, e.ok("-o", "json", "session", "show", "s1")); s["state"] != "closed" {
		t.Fatalf("state after close: %v", s["state"])
	}
	before := e.export()
	e.run("--principal", "alice", "admit", "s1", "--text", "late").wantExit(t, ExitConflict)
	if e.export() != before {
		t.Fatal("refused admit changed the store")
	}
	e.ok("--principal", "alice", "admit", "s1", "--text", "late", "--reopen")

	// compress: the current transcript continues in a child.
	r = e.ok("session", "compress", "s1", "--child", "s1.c1")
	if r.out != "compressed s1: s1 -> s1.c1\n" {
		t.Fatalf("compress: %q", r.out)
	}
	lin := decode[[]map[string]any](t, e.ok("-o", "json", "transcript", "--session", "s1", "--lineage"))
	if len(lin) != 2 || lin[0]["id"] != "s1" || lin[1]["id"] != "s1.c1" || lin[0]["end_reason"] != "compression" {
		t.Fatalf("lineage: %v", lin)
	}
	e.run("session", "compress", "s1", "--child", "s1.c1").wantExit(t, ExitConflict)
	r = e.ok("session", "compress", "s1")
	if !strings.HasPrefix(r.out, "compressed s1: s1.c1 -> s1:") {
		t.Fatalf("compress with a default child: %q", r.out)
	}

	// switch to a new transcript, then back to one of its own.
	if r := e.ok("session", "switch", "s1", "--transcript", "branch"); r.out != "switched s1 -> branch\n" {
		t.Fatalf("switch: %q", r.out)
	}
	e.ok("session", "switch", "s1", "--transcript", "s1")
	e.ok("session", "open", "s2")
	e.run("session", "switch", "s2", "--transcript", "branch").wantExit(t, ExitConflict)
	e.run("session", "switch", "s2").wantExit(t, ExitUsage)

	ss := decode[[]map[string]any](t, e.ok("-o", "json", "sessions"))
	if len(ss) != 2 || ss[0]["id"] != "s1" || ss[1]["id"] != "s2" {
		t.Fatalf("sessions: %v", ss)
	}
	r = e.ok("sessions")
	if lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "SESSION ") {
		t.Fatalf("sessions text:\n%s", r.out)
	}
	e.run("session", "show", "nosuch").wantExit(t, ExitNotFound)
	e.run("transcript", "nosuch").wantExit(t, ExitNotFound)
	e.run("transcript").wantExit(t, ExitUsage)
	e.run("transcript", "s1", "--session", "s1").wantExit(t, ExitUsage)
}

// viewer add|rm and attach: a viewer turns automation input into a turn;
// attach streams the transcript and removes its viewer when input ends.
func TestViewerAndAttach(t *testing.T) {
	e := newEnv(t)
	h := replyHandler(t, e.dir)
	e.ok("session", "open", "s1")

	id := strings.TrimSpace(e.ok("viewer", "add", "s1", "--ttl", "10m").out)
	if id == "" || strings.Contains(id, " ") {
		t.Fatalf("viewer add printed %q, want an id", id)
	}
	if s := decode[map[string]any](t, e.ok("-o", "json", "session", "show", "s1")); s["viewers"].(float64) != 1 {
		t.Fatalf("viewers: %v", s["viewers"])
	}
	e.ok("admit", "s1", "--producer", "process", "--identity", "p:1", "--text", "[finished] build")
	r := e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	if !strings.HasPrefix(r.out, "turn ") {
		t.Fatalf("automation input with a viewer: %q, want a turn", r.out)
	}
	v := decode[map[string]any](t, e.ok("-o", "json", "viewer", "add", "s1"))
	if v["session"] != "s1" || v["id"] == "" {
		t.Fatalf("viewer add json: %v", v)
	}
	e.ok("viewer", "rm", "s1", id)
	e.ok("viewer", "rm", "s1", v["id"].(string))
	if s := decode[map[string]any](t, e.ok("-o", "json", "session", "show", "s1")); s["viewers"].(float64) != 0 {
		t.Fatalf("viewers after rm: %v", s["viewers"])
	}
	e.run("viewer", "add", "s1", "--ttl", "0s").wantExit(t, ExitUsage)

	// attach with stdin at its end: prints the transcript, detaches.
	r = e.ok("attach", "s1")
	if r.out != "[1] user: [finished] build\n[2] assistant: re: [finished] build\n" {
		t.Fatalf("attach:\n%s", r.out)
	}
	lines := decodeLines[map[string]any](t, e.ok("-o", "json", "attach", "s1"))
	if len(lines) != 2 || lines[1]["role"] != "assistant" {
		t.Fatalf("attach -o json: %v", lines)
	}
	if s := decode[map[string]any](t, e.ok("-o", "json", "session", "show", "s1")); s["viewers"].(float64) != 0 {
		t.Fatalf("viewers after attach: %v", s["viewers"])
	}
	// attach until a signal, seeing a message that arrives meanwhile, and
	// closing the session on the way out.
	sigs := make(chan os.Signal, 1)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	ios, _, out, errOut := Test()
	ios.In = pr
	f := NewFactory(ios)
	f.Signals = func(...os.Signal) (<-chan os.Signal, func()) { return sigs, func() {} }
	root := NewRootCmd(f)
	root.SetArgs([]string{"--store", e.store, "attach", "s1", "--end-reason", "tui_close"})
	done := make(chan int, 1)
	go func() { done <- f.Exit(root.Execute()) }()
	waitFor(t, func() bool {
		s := decode[map[string]any](t, e.ok("-o", "json", "session", "show", "s1"))
		return s["viewers"].(float64) == 1
	}, nil)
	e.ok("admit", "s1", "--producer", "process", "--identity", "p:2", "--text", "[finished] test")
	e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	sigs <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Fatalf("attach ended by SIGTERM: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "[4] assistant: re: [finished] test\n") {
		t.Fatalf("attach did not stream the new messages:\n%s", out.String())
	}
	s := decode[map[string]any](t, e.ok("-o", "json", "session", "show", "s1"))
	if s["state"] != "closed" || s["viewers"].(float64) != 0 {
		t.Fatalf("after attach --end-reason: %v", s)
	}
	e.run("attach", "s1", "--end-reason", "bored").wantExit(t, ExitUsage)
}

// queue filters, show, find.
func TestQueueShowFind(t *testing.T) {
	e := newEnv(t)
	a1 := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "one"))
	a2 := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--producer", "watch", "--identity", "w:1", "--identity", "w:2", "--text", "two"))
	if a2.Result != "coalesced" {
		t.Fatalf("two identities: %s", a2.Result)
	}
	e.ok("cancel", a1.Admission.ID)

	q := decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s1", "--status", "done", "--outcome", "cancelled"))
	if len(q) != 1 || q[0].ID != a1.Admission.ID {
		t.Fatalf("queue --status done --outcome cancelled: %v", q)
	}
	q = decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s1", "--status", "queued,running", "--status", "unknown"))
	if len(q) != 1 || q[0].ID != a2.Admission.ID {
		t.Fatalf("queue --status queued,running,unknown: %v", q)
	}
	e.run("queue", "s1", "--outcome", "lost").wantExit(t, ExitUsage)
	// Spaces around a value are ignored; an empty flag is refused, not
	// read as "every status".
	q = decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s1", "--status", "queued, done", "--outcome", " cancelled"))
	if len(q) != 1 || q[0].ID != a1.Admission.ID {
		t.Fatalf("queue --status 'queued, done' --outcome ' cancelled': %v", q)
	}
	for _, flag := range []string{"--status", "--outcome"} {
		r := e.run("queue", "s1", flag, "").wantExit(t, ExitUsage)
		contains(t, "stderr", r.err, flag+" is empty")
		if r.out != "" {
			t.Fatalf("queue %s '': stdout %q", flag, r.out)
		}
	}

	got := decode[admissionOut](t, e.ok("-o", "json", "show", a2.Admission.ID))
	if got.ID != a2.Admission.ID || len(got.Identities) != 2 {
		t.Fatalf("show: %+v", got)
	}
	r := e.ok("show", a1.Admission.ID)
	contains(t, "show", r.out, "outcome:       cancelled\n")
	for _, ident := range []string{"w:1", "w:2"} {
		if f := decode[admissionOut](t, e.ok("-o", "json", "find", ident)); f.ID != a2.Admission.ID {
			t.Fatalf("find %s: %s", ident, f.ID)
		}
	}
	e.ok("find", "w:1", "--session", "s1")
	e.run("find", "w:1", "--session", "s2").wantExit(t, ExitNotFound)
	e.run("find", "w:3").wantExit(t, ExitNotFound)
	e.run("find", "w:1", "--session", "bad id").wantExit(t, ExitUsage)
}

// export then import into an empty store gives the same export; a bad line
// imports nothing.
func TestExportImport(t *testing.T) {
	e := newEnv(t)
	h := replyHandler(t, e.dir)
	e.ok("admit", "s1", "--text", "one \u00e9")
	e.ok("admit", "s1", "--producer", "p", "--identity", "i:1", "--text", "note")
	e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	e.ok("admit", "s2", "--text", "queued")
	e.ok("session", "compress", "s2", "--child", "s2.b")
	dump := e.export()
	file := filepath.Join(e.dir, "dump.ndjson")
	e.ok("export", "--file", file)
	if b, _ := os.ReadFile(file); string(b) != dump {
		t.Fatal("export --file differs from export to stdout")
	}

	other := "bbolt://" + filepath.Join(e.dir, "other.db")
	bad := strings.Replace(dump, "\n", "\n{\"session\":{\"id\":\"x\"},\"oops\":1}\n", 1)
	r := e.runWith(bad, false, "--store", other, "import")
	r.wantExit(t, ExitUsage)
	contains(t, "stderr", r.err, "line 2")
	// A refused import writes nothing: here not even the store file.
	e.run("--store", other, "export").wantExit(t, ExitNotFound)
	if _, err := os.Stat(filepath.Join(e.dir, "other.db")); err == nil {
		t.Fatal("a refused import created the store")
	}
	// A time that cannot be stored (stores keep UTC; JSON times have
	// four-digit years) is refused whole, not written unreadable.
	at := regexp.MustCompile(`"admitted_at":"[^"]*"`)
	if !at.MatchString(dump) {
		t.Fatal("no admitted_at in the export")
	}
	early := at.ReplaceAllLiteralString(dump, `"admitted_at":"0000-01-01T00:30:00+01:00"`)
	r = e.runWith(early, false, "--store", other, "import")
	r.wantExit(t, ExitUsage)
	contains(t, "stderr", r.err, "outside the years 0 to 9999")
	if r := e.run("--store", other, "export"); r.code != 0 && r.code != ExitNotFound || r.out != "" {
		t.Fatalf("a refused import left: exit %d, %q", r.code, r.out)
	}
	r = e.ok("--store", other, "import", "--file", file)
	if !strings.HasPrefix(r.out, "imported ") {
		t.Fatalf("import: %q", r.out)
	}
	if got := e.ok("--store", other, "export").out; got != dump {
		t.Fatalf("round trip differs:\n%s\nwant:\n%s", got, dump)
	}
	// Importing again is a no-op, and says so.
	if n := decode[map[string]int](t, e.runWith(dump, false, "--store", other, "-o", "json", "import")); n["imported"] != 0 || n["present"] == 0 {
		t.Fatalf("re-import: %v", n)
	}
	if got := e.ok("--store", other, "export").out; got != dump {
		t.Fatal("re-import changed the store")
	}
	e.run("export", "--file", filepath.Join(e.dir, "no", "such", "dir", "x")).wantExit(t, ExitUsage)
}

// drain --follow keeps executing inputs as they arrive, until a signal;
// in text, what it executed is printed as it goes.
func TestDrainFollow(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(map[bool]string{false: "session", true: "all"}[all], func(t *testing.T) {
			e := newEnv(t)
			h := replyHandler(t, e.dir)
			sigs := make(chan os.Signal, 1)
			e.configure = func(f *Factory) {
				f.Signals = func(...os.Signal) (<-chan os.Signal, func()) { return sigs, func() {} }
			}
			e.ok("session", "open", "s1")
			args := []string{"drain", "s1", "--follow", "--"}
			if all {
				args = []string{"drain", "--all", "--follow", "--"}
			}
			done := make(chan result, 1)
			go func() { done <- e.run(append(args, h...)...) }()
			var ids []string
			for _, text := range []string{"one", "two"} {
				a := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", text))
				ids = append(ids, a.Admission.ID)
				waitFor(t, func() bool {
					return decode[admissionOut](t, e.ok("-o", "json", "show", a.Admission.ID)).Status == "done"
				}, done)
			}
			sigs <- syscall.SIGINT
			r := <-done
			if r.code != 130 {
				t.Fatalf("drain --follow stopped by SIGINT: exit %d\n%s\n%s", r.code, r.out, r.err)
			}
			want := "turn " + ids[0] + " seq 1 -> s1\nturn " + ids[1] + " seq 2 -> s1\n"
			if r.out != want {
				t.Fatalf("drain --follow printed:\n%s\nwant:\n%s", r.out, want)
			}
			contains(t, "stderr", r.err, "hermesq: error: drain interrupted by SIGINT")
		})
	}
}

// attach follows its session across a compression without losing the
// messages the old transcript received since attach last looked.
func TestAttachAcrossCompression(t *testing.T) {
	e := newEnv(t)
	h := replyHandler(t, e.dir)
	e.ok("admit", "s1", "--text", "one")
	e.ok(append([]string{"drain", "s1", "--"}, h...)...)

	ios, _, out, _ := Test()
	f := NewFactory(ios)
	f.v.Set(keyStore, e.store)
	st, err := f.Store()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &transcriptWatch{st: st, p: &printer{ios: ios, format: formatText}, session: "s1"}
	ctx := context.Background()
	if err := w.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// A turn, then a compression, both before attach looks again.
	e.ok("admit", "s1", "--text", "two")
	e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	e.ok("session", "compress", "s1", "--child", "s1.2")
	e.ok("admit", "s1", "--text", "three")
	e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	if err := w.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	want := "[1] user: one\n[2] assistant: re: one\n[3] user: two\n[4] assistant: re: two\n[1] user: three\n[2] assistant: re: three\n"
	if out.String() != want {
		t.Fatalf("attach across a compression printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A following drain prints each executed admission's line as soon as it is
// settled, not when it stops.
func TestDrainFollowPrintsAsItGoes(t *testing.T) {
	e := newEnv(t)
	h := replyHandler(t, e.dir)
	e.ok("session", "open", "s1")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	sigs := make(chan os.Signal, 1)
	ios, _, _, errOut := Test()
	ios.Out = pw
	f := NewFactory(ios)
	f.Signals = func(...os.Signal) (<-chan os.Signal, func()) { return sigs, func() {} }
	root := NewRootCmd(f)
	root.SetArgs(append([]string{"--store", e.store, "drain", "s1", "--follow", "--"}, h...))
	done := make(chan int, 1)
	go func() {
		code := f.Exit(root.Execute())
		pw.Close()
		done <- code
	}()
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	a := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "one"))
	select {
	case l := <-lines:
		if want := "turn " + a.Admission.ID + " seq 1 -> s1"; l != want {
			t.Fatalf("first line %q, want %q", l, want)
		}
	case code := <-done:
		t.Fatalf("drain --follow ended (exit %d) before printing: %s", code, errOut.String())
	case <-time.After(time.Minute):
		t.Fatal("drain --follow printed nothing for the settled turn while still running")
	}
	sigs <- syscall.SIGINT
	if code := <-done; code != 130 {
		t.Fatalf("exit %d, want 130", code)
	}
	if l, ok := <-lines; ok {
		t.Fatalf("a line after the signal: %q (each admission is printed once)", l)
	}
}
