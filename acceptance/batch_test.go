package acceptance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
)

// batchLine is one --batch input: human, with a request id, so a re-run
// finds it.
func batchLine(i int) string {
	return fmt.Sprintf(`{"session":"b%d","text":"input %d","request_id":"r%d"}`+"\n", i%50, i, i)
}

// lineCounter is a writer counting the lines written to it, and keeping
// them.
type lineCounter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines int
	more  chan struct{}
}

func newLineCounter() *lineCounter { return &lineCounter{more: make(chan struct{}, 1)} }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	c.lines += bytes.Count(p, []byte("\n"))
	select {
	case c.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (c *lineCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

func (c *lineCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// waitLines waits until c holds n lines, or the command exited.
func (c *lineCounter) waitLines(t *testing.T, n int, exited <-chan struct{}) {
	t.Helper()
	guard := time.After(2 * time.Minute) // a hang guard, not a timing assertion
	for c.count() < n {
		select {
		case <-c.more:
		case <-exited:
			t.Fatalf("the batch exited with %d result lines, want %d before the end of its input", c.count(), n)
		case <-guard:
			t.Fatalf("no %d result lines while the batch is still being written (got %d): results are not streamed", n, c.count())
		}
	}
}

type batchRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *lineCounter
	errOut *lineCounter
	exited chan struct{}
	err    error
}

func startBatch(t *testing.T, store string, extra ...string) *batchRun {
	t.Helper()
	args := append([]string{"--store", store, "-o", "jsonl"}, extra...)
	args = append(args, "admit", "--batch", "-")
	cmd := exec.Command(hermesqBin(t), args...)
	cmd.Env = cleanEnv(t)
	b := &batchRun{cmd: cmd, out: newLineCounter(), errOut: newLineCounter(), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.out, b.errOut
	var err error
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.err = cmd.Wait(); close(b.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-b.exited })
	return b
}

func (b *batchRun) write(t *testing.T, from, to int) {
	t.Helper()
	var sb strings.Builder
	for i := from; i < to; i++ {
		sb.WriteString(batchLine(i))
	}
	if _, err := io.WriteString(b.stdin, sb.String()); err != nil {
		t.Fatalf("write batch lines: %v", err)
	}
}

func (b *batchRun) wait(t *testing.T) int {
	t.Helper()
	b.stdin.Close()
	<-b.exited
	if b.err == nil {
		return 0
	}
	if ee, ok := b.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatal(b.err)
	return -1
}

// cleanEnv is the caller's environment without HERMESQ_* settings.
func cleanEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMESQ_") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CONFIG_HOME="+t.TempDir())
}

type batchResult struct {
	Result    string `json:"result"`
	Line      int    `json:"line"`
	Error     string `json:"error"`
	Admission struct {
		ID string `json:"id"`
	} `json:"admission"`
}

func results(t *testing.T, out string) []batchResult {
	t.Helper()
	var rs []batchResult
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r batchResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("result line %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs
}

// admit --batch streams: a line written alone into the pipe is committed
// and printed at once, while the batch stays open; lines that arrive
// together are committed together and printed before the rest of the batch
// has even been written; every committed line's result is printed even
// when a later line fails, and the exit code is the failed line's.
func TestBatchStreamsResults(t *testing.T) {
	for _, s := range storeURLs(t) {
		t.Run(s.Name, func(t *testing.T) {
			u := s.URL(t)
			b := startBatch(t, u)
			b.write(t, 0, 1)
			b.out.waitLines(t, 1, b.exited) // one line, with the batch still open
			b.write(t, 1, 300)
			b.out.waitLines(t, 300, b.exited)
			b.write(t, 300, 600)
			// A later line reuses line 0's request id with another payload: a
			// conflict (exit 4) after 599 committed lines.
			io.WriteString(b.stdin, `{"session":"b0","text":"another payload","request_id":"r0"}`+"\n")
			code := b.wait(t)
			if code != 4 {
				t.Fatalf("exit %d, want 4 (the conflicting line)\nstderr: %s", code, b.errOut)
			}
			rs := results(t, b.out.String())
			if len(rs) != 601 {
				t.Fatalf("%d result lines, want 601", len(rs))
			}
			for i, r := range rs[:600] {
				if r.Result != "admitted" {
					t.Fatalf("line %d: %+v, want admitted", i+1, r)
				}
			}
			if last := rs[600]; last.Line != 601 || last.Error != "conflict" {
				t.Fatalf("last line: %+v, want a conflict on line 601", last)
			}
			if got := strings.Count(b.errOut.String(), "\n"); got != 1 {
				t.Fatalf("stderr: %d lines, want one for the bad line:\n%s", got, b.errOut)
			}
		})
	}
}

// A store that fails part-way stops the batch: the chunks before are
// committed and printed, the failed chunk's lines are reported unavailable,
// exit 75; re-running the whole batch admits the rest and finds the
// committed lines as duplicates.
func TestBatchStoreFailsMidway(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAOF()) // what was committed survives the kill
	u := srv.FreshURL()
	b := startBatch(t, u, "--timeout", "2s")
	b.write(t, 0, 300)
	b.out.waitLines(t, 300, b.exited)
	srv.Kill()
	b.write(t, 300, 400)
	code := b.wait(t)
	if code != 75 {
		t.Fatalf("exit %d, want 75\nstderr: %s", code, b.errOut)
	}
	rs := results(t, b.out.String())
	if len(rs) != 400 {
		t.Fatalf("%d result lines, want 400 (300 committed, 100 unavailable)", len(rs))
	}
	for i, r := range rs {
		switch {
		case i < 300 && r.Result != "admitted":
			t.Fatalf("line %d: %+v, want admitted", i+1, r)
		case i >= 300 && (r.Error != "unavailable" || r.Line != i+1):
			t.Fatalf("line %d: %+v, want unavailable", i+1, r)
		}
	}
	srv.Restart()
	again := startBatch(t, u)
	again.write(t, 0, 400)
	if code := again.wait(t); code != 0 {
		t.Fatalf("re-run: exit %d\n%s", code, again.errOut)
	}
	dup := 0
	for _, r := range results(t, again.out.String()) {
		if r.Result == "duplicate" {
			dup++
		}
	}
	if dup != 300 {
		t.Fatalf("re-run: %d duplicates, want the 300 committed lines", dup)
	}
}

// A 1,000,000-line batch stays under 64 MiB peak RSS (the process's
// rusage maxrss), on each store. Behind HERMESQ_BATCH_RSS=1: it admits a
// million inputs.
func TestBatchPeakRSS(t *testing.T) {
	if os.Getenv("HERMESQ_BATCH_RSS") == "" {
		t.Skip("set HERMESQ_BATCH_RSS=1 to admit a 1,000,000-line batch and measure its peak RSS")
	}
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("HERMESQ_BATCH_LINES")); err == nil && v > 0 {
		n = v
	}
	file := filepath.Join(t.TempDir(), "batch.ndjson")
	fh, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(fh)
	for i := 0; i < n; i++ {
		bw.WriteString(batchLine(i))
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	for _, s := range storeURLs(t) {
		t.Run(s.Name, func(t *testing.T) {
			cmd := exec.Command(hermesqBin(t), "--store", s.URL(t), "-o", "jsonl", "admit", "--batch", file)
			cmd.Env = cleanEnv(t)
			out := &lineCounter{more: make(chan struct{}, 1)}
			cmd.Stdout = countOnly{out}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("admit --batch: %v\n%s", err, stderr.String())
			}
			if out.count() != n {
				t.Fatalf("%d result lines, want %d", out.count(), n)
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			peak := ru.Maxrss * 1024 // KiB on Linux
			t.Logf("%s: %d lines, peak RSS %.1f MiB, %s", s.Name, n, float64(peak)/(1<<20), time.Since(start).Round(time.Second))
			if peak >= 64<<20 {
				t.Fatalf("peak RSS %.1f MiB, want under 64 MiB", float64(peak)/(1<<20))
			}
		})
	}
}

// countOnly counts lines without keeping them.
type countOnly struct{ c *lineCounter }

func (w countOnly) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	w.c.lines += bytes.Count(p, []byte("\n"))
	w.c.mu.Unlock()
	return len(p), nil
}
