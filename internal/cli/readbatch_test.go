package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// commitFunc is a batchSink whose commit ends each chunk's work before it
// returns.
type commitFunc func([]batchLine) error

func (f commitFunc) commit(c []batchLine) error { return f(c) }
func (commitFunc) running() <-chan struct{}     { return nil }
func (commitFunc) finish() error                { return nil }

func batchLines(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, `{"session":"s","producer":"p","identities":["i:%d"],"text":"t"}`+"\n", i)
	}
	return b.String()
}

// readBatch hands every line to commit once, in order, in chunks of at
// most batchChunkLines, while it reads ahead in another goroutine.
func TestReadBatchOrder(t *testing.T) {
	const n = 5000
	next := 1
	chunks := 0
	err := readBatch(strings.NewReader(batchLines(0, n)), "me", commitFunc(func(c []batchLine) error {
		chunks++
		if len(c) == 0 || len(c) > batchChunkLines {
			t.Fatalf("chunk of %d lines", len(c))
		}
		for _, l := range c {
			if l.n != next || l.err != nil || l.in.Principal != "me" || l.in.Identities[0] != fmt.Sprint("i:", next-1) {
				t.Fatalf("line %d: got n=%d err=%v in=%+v", next, l.n, l.err, l.in)
			}
			next++
		}
		return nil
	}))
	if err != nil || next != n+1 || chunks != (n+batchChunkLines-1)/batchChunkLines {
		t.Fatalf("err %v, %d lines in %d chunks", err, next-1, chunks)
	}
}

// A chunk the store failed whole stops the batch: no later chunk is
// tried, and readBatch returns even though the input has not ended (the
// reader is left waiting on it).
func TestReadBatchStops(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { _, _ = io.WriteString(pw, batchLines(0, 3*batchChunkLines+10)) }()
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- readBatch(pr, "me", commitFunc(func(c []batchLine) error {
			calls++
			if calls == 2 {
				return errStopBatch
			}
			return nil
		}))
	}()
	select {
	case err := <-done:
		if err != nil || calls != 2 {
			t.Fatalf("err %v after %d commits, want nil after 2", err, calls)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("readBatch did not return after the batch stopped")
	}
}

// Any other error of commit (stdout gone) ends the batch with that error;
// a read error ends it after the chunks read before it.
func TestReadBatchErrors(t *testing.T) {
	boom := errors.New("write /dev/stdout: broken pipe")
	err := readBatch(strings.NewReader(batchLines(0, 3000)), "me", commitFunc(func([]batchLine) error { return boom }))
	if !errors.Is(err, boom) {
		t.Fatalf("commit error: got %v", err)
	}
	bad := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader(batchLines(0, 2*batchChunkLines)), iotest.ErrReader(bad))
	committed := 0
	err = readBatch(r, "me", commitFunc(func(c []batchLine) error { committed += len(c); return nil }))
	if !errors.Is(err, bad) || committed != 2*batchChunkLines {
		t.Fatalf("read error: got %v after %d lines committed, want %v after %d", err, committed, bad, 2*batchChunkLines)
	}
}

// brokenPipe is a stdout that takes limit bytes and then fails every write.
type brokenPipe struct{ limit int }

func (w *brokenPipe) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n := w.limit
		w.limit = 0
		return n, errors.New("write /dev/stdout: broken pipe")
	}
	w.limit -= len(p)
	return len(p), nil
}

// A batch whose results cannot be printed (stdout gone) stops: exit 1 with
// the write error on one stderr line, the chunks committed before it
// committed whole and no more read; re-running the whole batch finds those
// as duplicates and admits the rest, so nothing is lost or admitted twice.
func TestBatchStdoutGone(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	n := 5 * batchChunkLines
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `{"session":"s1","text":"line %d","request_id":"r%d"}`+"\n", i, i)
	}
	batch := filepath.Join(e.dir, "batch.ndjson")
	if err := os.WriteFile(batch, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.configure = func(f *Factory) { f.IO.Out = &brokenPipe{limit: 200 * 1024} } // within the first chunks' results
	r := e.run("-o", "jsonl", "admit", "--batch", batch).wantExit(t, ExitFailure)
	if !strings.Contains(r.err, "broken pipe") {
		t.Fatalf("stderr %q does not name the write error", r.err)
	}
	e.configure = nil
	queued := func() int { return len(decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s1"))) }
	got := queued()
	if got%batchChunkLines != 0 || got == 0 || got > 2*batchChunkLines {
		t.Fatalf("%d admitted before the batch stopped, want whole chunks, at most two", got)
	}
	r = e.run("-o", "jsonl", "admit", "--batch", batch).wantExit(t, 0)
	dup := strings.Count(r.out, `"result":"duplicate"`)
	if dup != got || strings.Count(r.out, `"result":"admitted"`) != n-got {
		t.Fatalf("re-run: %d duplicates, want %d; %d admitted, want %d", dup, got, strings.Count(r.out, `"result":"admitted"`), n-got)
	}
	if q := queued(); q != n {
		t.Fatalf("%d queued after the re-run, want %d", q, n)
	}
}

// lagSink is a batchSink that leaves each chunk's call running until the
// test ends it, as batchRun leaves its store call: commit waits for the
// call before and "prints" it, finish prints the last one.
type lagSink struct {
	calls   chan chan struct{} // each call's done, for the test to close
	printed chan int           // the first line of each chunk printed
	cur     *lagCall
}

type lagCall struct {
	first int
	done  chan struct{}
}

func newLagSink() *lagSink {
	return &lagSink{calls: make(chan chan struct{}, 64), printed: make(chan int, 64)}
}

func (s *lagSink) commit(c []batchLine) error {
	call := &lagCall{first: c[0].n, done: make(chan struct{})}
	if prev := s.cur; prev != nil {
		<-prev.done
		s.printed <- prev.first
	}
	s.cur = call
	s.calls <- call.done
	return nil
}

func (s *lagSink) running() <-chan struct{} {
	if s.cur == nil {
		return nil
	}
	return s.cur.done
}

func (s *lagSink) finish() error {
	if s.cur != nil {
		<-s.cur.done
		s.printed <- s.cur.first
		s.cur = nil
	}
	return nil
}

// A chunk's results are printed as soon as its call ends, though no more
// input has come (a producer writing now and then into a pipe sees each
// result at once); every chunk is printed once, in order, the last when
// the input ends.
func TestReadBatchFinishesWhenCallEnds(t *testing.T) {
	pr, pw, err := os.Pipe() // a pipe, as stdin is: a pause in it is seen
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	s := newLagSink()
	done := make(chan error, 1)
	go func() { done <- readBatch(pr, "me", s) }()
	guard := time.After(time.Minute) // a hang guard, not a timing assertion
	next := func(what string, c <-chan int) int {
		t.Helper()
		select {
		case v := <-c:
			return v
		case <-guard:
			t.Fatalf("no %s", what)
		}
		return 0
	}
	nextCall := func() chan struct{} {
		t.Helper()
		select {
		case d := <-s.calls:
			return d
		case <-guard:
			t.Fatal("no chunk committed")
		}
		return nil
	}
	_, _ = io.WriteString(pw, batchLines(0, 1))
	close(nextCall())
	if got := next("result while the batch is open", s.printed); got != 1 {
		t.Fatalf("printed the chunk of line %d, want 1", got)
	}
	// Two chunks written at once: the second is committed while the first
	// is still running, and the first is printed before it.
	go func() { _, _ = io.WriteString(pw, batchLines(1, 1+batchChunkLines+5)); pw.Close() }()
	first := nextCall()
	close(first)
	close(nextCall())
	for _, want := range []int{2, 2 + batchChunkLines} {
		if got := next("result", s.printed); got != want {
			t.Fatalf("printed the chunk of line %d, want %d", got, want)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-guard:
		t.Fatal("readBatch did not return at the end of its input")
	}
	if len(s.printed) != 0 {
		t.Fatalf("%d chunks printed twice", len(s.printed))
	}
}
