//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/producertest"
)

type fixture struct {
	t    *testing.T
	dir  string
	log  string
	ob   *producer.Outbox
	w    *Watcher
	now  time.Time
	conf string
}

func newFixture(t *testing.T, conf string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), now: time.Unix(1700000000, 0)}
	f.log = filepath.Join(f.dir, "app.log")
	f.conf = strings.ReplaceAll(conf, "LOG", f.log)
	f.write("")
	f.restart()
	return f
}

// restart makes a new watcher over the same state, as a restarted plugin.
func (f *fixture) restart() {
	f.t.Helper()
	watches, err := parseConfig([]byte(f.conf))
	if err != nil {
		f.t.Fatal(err)
	}
	state := filepath.Join(f.dir, "state")
	ob, err := producer.OpenOutbox(state, producer.OutboxOptions{Now: func() time.Time { return f.now }})
	if err != nil {
		f.t.Fatal(err)
	}
	w, err := NewWatcher(watches, ob, state)
	if err != nil {
		f.t.Fatal(err)
	}
	w.now = func() time.Time { return f.now }
	f.ob, f.w = ob, w
}

func (f *fixture) write(s string) {
	f.t.Helper()
	if err := os.WriteFile(f.log, []byte(s), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) append(s string) {
	f.t.Helper()
	fh, err := os.OpenFile(f.log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(s); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) scan() {
	f.t.Helper()
	if err := f.w.Scan(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// events lists the outbox's events as "KIND TEXT", in the order added.
func (f *fixture) events() []string {
	f.t.Helper()
	es, err := f.ob.Entries(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		var id []string
		if err := json.Unmarshal([]byte(e.Identity), &id); err != nil || len(id) != 3 {
			f.t.Fatalf("identity %q is not [kind, name, event]", e.Identity)
		}
		if e.Session != "s1" {
			f.t.Errorf("event for session %q", e.Session)
		}
		out = append(out, id[0]+" "+e.Text)
	}
	return out
}

func (f *fixture) want(want ...string) {
	f.t.Helper()
	got := f.events()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const oneWatch = `{"watches":[{"name":"app","path":"LOG","pattern":"ERROR","session":"s1"}]}`

func TestMatchesInOrderAndOnce(t *testing.T) {
	f := newFixture(t, oneWatch)
	f.scan()
	f.append("ok 1\nERROR one\nok 2\nERROR two\nERROR three (partial")
	f.scan()
	f.want("watch_match [watch] app: ERROR one", "watch_match [watch] app: ERROR two")
	f.append(" line)\n")
	f.scan()
	f.scan()
	f.want("watch_match [watch] app: ERROR one", "watch_match [watch] app: ERROR two",
		"watch_match [watch] app: ERROR three (partial line)")
	// A restarted plugin goes on where it was: nothing twice.
	f.restart()
	f.append("ERROR four\r\n")
	f.scan()
	f.want("watch_match [watch] app: ERROR one", "watch_match [watch] app: ERROR two",
		"watch_match [watch] app: ERROR three (partial line)", "watch_match [watch] app: ERROR four")
}

func TestPositionsLostAddNothingTwice(t *testing.T) {
	f := newFixture(t, strings.Replace(oneWatch, `"session"`, `"from_start":true,"session"`, 1))
	f.append("ERROR one\nERROR two\n")
	f.scan()
	// The plugin died after adding the events and before saving where it
	// was: the lines are read again and resolve to the same identities.
	if err := os.Remove(filepath.Join(f.dir, "state", stateFile)); err != nil {
		t.Fatal(err)
	}
	f.restart()
	f.scan()
	f.want("watch_match [watch] app: ERROR one", "watch_match [watch] app: ERROR two")
}

func TestFirstSightFromEnd(t *testing.T) {
	f := newFixture(t, oneWatch)
	f.write("ERROR before the watch\n")
	f.scan()
	f.append("ERROR after\n")
	f.scan()
	f.want("watch_match [watch] app: ERROR after")
}

func TestRateExceededStops(t *testing.T) {
	f := newFixture(t, `{"watches":[{"name":"app","path":"LOG","pattern":"ERROR","session":"s1","rate":"2/1m"}]}`)
	f.scan()
	f.append("ERROR 1\nERROR 2\n")
	f.scan()
	f.now = f.now.Add(2 * time.Minute) // a new window
	f.append("ERROR 3\nERROR 4\nERROR 5\nERROR 6\n")
	f.scan()
	f.append("ERROR 7\n")
	f.scan()
	f.restart()
	f.scan()
	f.want("watch_match [watch] app: ERROR 1", "watch_match [watch] app: ERROR 2",
		"watch_match [watch] app: ERROR 3", "watch_match [watch] app: ERROR 4",
		"watch_disabled [watch] app disabled: rate exceeded (more than 2 matches in 1m0s)")
}

func TestFileGone(t *testing.T) {
	f := newFixture(t, oneWatch)
	f.scan()
	f.append("ERROR last words\n")
	f.scan()
	if err := os.Remove(f.log); err != nil {
		t.Fatal(err)
	}
	f.scan()
	f.scan()
	f.restart()
	f.write("ERROR a new file under the old name\n")
	f.scan()
	f.want("watch_match [watch] app: ERROR last words",
		"watch_disabled [watch] app disabled: file gone ("+f.log+")")
}

func TestTruncatedOrReplacedReadFromStart(t *testing.T) {
	f := newFixture(t, oneWatch)
	f.scan()
	f.append("ERROR 1\nERROR 2\n")
	f.scan()
	f.write("ERROR rotated\n") // shorter: truncated
	f.scan()
	if err := os.Rename(f.log, f.log+".1"); err != nil {
		t.Fatal(err)
	}
	f.write("ERROR in the new file but longer than before\n")
	f.scan()
	f.want("watch_match [watch] app: ERROR 1", "watch_match [watch] app: ERROR 2",
		"watch_match [watch] app: ERROR rotated", "watch_match [watch] app: ERROR in the new file but longer than before")
}

func TestDisabledInConfig(t *testing.T) {
	f := newFixture(t, `{"watches":[{"name":"app","path":"LOG","pattern":"E","session":"s1","disabled":true}]}`)
	f.append("E\n")
	f.scan()
	f.scan()
	f.want("watch_disabled [watch] app disabled: disabled in config")
}

func TestBadConfigRefused(t *testing.T) {
	for _, c := range []struct{ conf, want string }{
		{`{"watches":[{"name":"a b","path":"/x","pattern":"E","session":"s1"}]}`, `name "a b"`},
		{`{"watches":[{"name":"a","path":"x","pattern":"E","session":"s1"}]}`, `path "x" is not absolute`},
		{`{"watches":[{"name":"a","path":"/x","pattern":"(","session":"s1"}]}`, "pattern: error parsing regexp"},
		{`{"watches":[{"name":"a","path":"/x","pattern":"","session":"s1"}]}`, "pattern is empty"},
		{`{"watches":[{"name":"a","path":"/x","pattern":"E","session":""}]}`, "session is empty"},
		{`{"watches":[{"name":"a","path":"/x","pattern":"E","session":"s1","rate":"0/1m"}]}`, `rate "0/1m"`},
		{`{"watches":[{"name":"a","path":"/x","pattern":"E","session":"s1","rate":"5"}]}`, `rate "5"`},
		{`{"watches":[{"name":"a","path":"/x","pattern":"E","session":"s1"},{"name":"a","path":"/y","pattern":"E","session":"s1"}]}`, "used twice"},
		{`{"watches":[{"name":"a","path":"/x","patern":"E","session":"s1"}]}`, `unknown field "patern"`},
		{`{"watch":[]}`, `unknown field "watch"`},
	} {
		_, err := parseConfig([]byte(c.conf))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.conf, err, c.want)
		}
	}
}

// TestProducerContract runs the SDK's producer checks on the watch
// producer over gRPC: lines read at poll time are offered, released and
// deferred ones come back, completed ones do not.
func TestProducerContract(t *testing.T) {
	f := newFixture(t, oneWatch)
	f.scan()
	f.append("ERROR one\nERROR two\nfine\nERROR three\n")
	producertest.Run(t, watchProducer{Outbox: f.ob, w: f.w})
	c, err := f.ob.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Delivered != 3 || c.Pending != 0 {
		t.Errorf("outbox after the run: %+v, want 3 delivered", c)
	}
}

// TestLongLineSkipped: a line longer than maxLine is skipped to its
// newline however many scans it takes, counted, and never holds back the
// lines after it; a 9 MiB line without a newline yet, then matching lines.
func TestLongLineSkipped(t *testing.T) {
	f := newFixture(t, oneWatch)
	f.scan()
	f.append("ERROR before\n" + strings.Repeat("ERROR ", 9<<20/6)) // no newline yet
	f.scan()
	f.want("watch_match [watch] app: ERROR before")
	f.append(strings.Repeat("x", 100) + "\nERROR after 1\nok\nERROR after 2\n")
	f.scan()
	f.want("watch_match [watch] app: ERROR before", "watch_match [watch] app: ERROR after 1", "watch_match [watch] app: ERROR after 2")
	if p := f.w.pos["app"]; p.Skipped != 1 || p.Skipping {
		t.Errorf("position %+v, want one line skipped and none being skipped", *p)
	}
	// A restarted plugin inside a long line goes on skipping it.
	f.append(strings.Repeat("ERROR ", 20<<10))
	f.scan()
	f.restart()
	f.append(strings.Repeat("ERROR ", 20<<10) + "\nERROR after 3\n")
	f.scan()
	f.want("watch_match [watch] app: ERROR before", "watch_match [watch] app: ERROR after 1", "watch_match [watch] app: ERROR after 2",
		"watch_match [watch] app: ERROR after 3")
}

// TestWholeLinesMatched: a line is matched whole or not at all: one of
// exactly maxLine bytes is matched, one longer is skipped, never cut and
// matched, so `(a+)+$` finds no match in a 1 MiB line "aaa…ab".
func TestWholeLinesMatched(t *testing.T) {
	f := newFixture(t, `{"watches":[{"name":"app","path":"LOG","pattern":"(a+)+$","session":"s1"}]}`)
	f.scan()
	long := strings.Repeat("a", 1<<20) + "b"
	atLimit := strings.Repeat("a", maxLine)
	f.append(long + "\n" + strings.Repeat("a", maxLine-1) + "b\n" + atLimit + "\r\n" + atLimit + "a\n" + "aaa\n")
	f.scan()
	got := f.events()
	if len(got) != 2 || got[0] != "watch_match [watch] app: "+atLimit || got[1] != "watch_match [watch] app: aaa" {
		short := make([]string, len(got))
		for i, g := range got {
			short[i] = fmt.Sprintf("%.60s… (%d bytes)", g, len(g))
		}
		t.Errorf("events %q, want the line of exactly %d bytes and \"aaa\"", short, maxLine)
	}
	if p := f.w.pos["app"]; p.Skipped != 2 {
		t.Errorf("%d lines skipped, want 2 (the 1 MiB line and the one a byte over the limit)", p.Skipped)
	}
}

// TestNotRegularRefused: a watch of a FIFO, a device or a folder is
// refused by the configuration check, which never opens it (so never
// blocks on a FIFO without a writer).
func TestNotRegularRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "is a FIFO, not a regular file"},
		{dir, "is a folder, not a regular file"},
		{"/dev/null", "is a character device, not a regular file"},
	} {
		conf := fmt.Sprintf(`{"watches":[{"name":"a","path":%q,"pattern":"E","session":"s1"}]}`, c.path)
		done := make(chan error, 1)
		go func() { _, err := parseConfig([]byte(conf)); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error with %q", c.path, err, c.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the configuration check still runs after 30 s", c.path)
		}
	}
}

// TestBecameFIFOStops: a watched path replaced by a FIFO after the
// configuration was checked stops the watch (watch_disabled) and never
// blocks the scan.
func TestBecameFIFOStops(t *testing.T) {
	f := newFixture(t, oneWatch)
	f.scan()
	if err := os.Remove(f.log); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.log, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.w.Scan(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a scan of a FIFO still runs after 30 s")
	}
	f.scan()
	f.want("watch_disabled [watch] app disabled: not a regular file (" + f.log + ")")
}
