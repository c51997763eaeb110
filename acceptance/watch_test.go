package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestWatchProducer is issue 8, acceptance 5, through the real watch plugin
// and the host on both stores: lines appended to a watched file become
// watch_match admissions in order (notes, nobody watching); exceeding the
// rate limit yields one watch_disabled and stops the watch; deleting the
// file yields watch_disabled.
func TestWatchProducer(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "watch")
		appLog, burstLog := filepath.Join(c.dir, "app.log"), filepath.Join(c.dir, "burst.log")
		for _, f := range []string{appLog, burstLog} {
			if err := os.WriteFile(f, []byte("ERROR before the watch began\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg := filepath.Join(c.dir, "config.yaml")
		conf := fmt.Sprintf(`producers:
  watch:
    config:
      watches:
        - name: app
          path: %s
          pattern: 'ERROR|FATAL'
          session: s1
        - name: burst
          path: %s
          pattern: ERROR
          session: s1
          rate: 2/1h
`, appLog, burstLog)
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		c.env = append(c.env, "HERMESQ_CONFIG="+cfg)
		c.ok("session", "open", "s1")
		c.ok("producers", "run", "--once") // the watches start at the files' ends
		if as := c.all("s1"); len(as) != 0 {
			t.Fatalf("%d admissions before any line was appended", len(as))
		}

		appendTo(t, appLog, "ERROR disk full\nall good\nFATAL out of memory\n")
		c.ok("producers", "run", "--once")
		appendTo(t, appLog, "ERROR third\n")
		c.ok("producers", "run", "--once")
		c.ok("producers", "run", "--once") // nothing new: nothing twice
		c.ok("drain", "s1")
		wantNotes(t, c, "s1", []string{
			"[watch] app: ERROR disk full", "[watch] app: FATAL out of memory", "[watch] app: ERROR third",
		})
		for _, a := range c.all("s1") {
			if a.Producer != "watch" || len(a.Identities) != 1 || watchKind(t, a) != "watch_match" {
				t.Errorf("admission %s: producer %q identities %q, want watch and one watch_match identity", a.ID, a.Producer, a.Identities)
			}
		}

		// Three matches where the rate allows two: two watch_match, one
		// watch_disabled, and nothing from the stopped watch after.
		appendTo(t, burstLog, "ERROR 1\nERROR 2\nERROR 3\nERROR 4\n")
		c.ok("producers", "run", "--once")
		appendTo(t, burstLog, "ERROR 5\n")
		c.ok("producers", "run", "--once")
		// The app log goes away.
		if err := os.Remove(appLog); err != nil {
			t.Fatal(err)
		}
		c.ok("producers", "run", "--once")
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1")
		wantNotes(t, c, "s1", []string{
			"[watch] app: ERROR disk full", "[watch] app: FATAL out of memory", "[watch] app: ERROR third",
			"[watch] burst: ERROR 1", "[watch] burst: ERROR 2",
			"[watch] burst disabled: rate exceeded (more than 2 matches in 1h0m0s)",
			"[watch] app disabled: file gone (" + appLog + ")",
		})
		var kinds []string
		for _, a := range c.all("s1") {
			kinds = append(kinds, watchKind(t, a))
			if a.Status != backend.StatusDone || a.Outcome != backend.OutcomeCompleted || a.Mode != backend.ModeNote {
				t.Errorf("admission %s: %s/%s/%s, want done/completed/note", a.ID, a.Status, a.Outcome, a.Mode)
			}
		}
		want := []string{"watch_match", "watch_match", "watch_match", "watch_match", "watch_match", "watch_disabled", "watch_disabled"}
		if !slices.Equal(kinds, want) {
			t.Errorf("identity kinds %q, want %q", kinds, want)
		}
		// Every outbox event was delivered.
		for id, e := range c.outbox("watch") {
			if e.State != "delivered" {
				t.Errorf("outbox event %s: %s, want delivered", id, e.State)
			}
		}
	})
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func wantNotes(t *testing.T, c *cli, transcript string, want []string) {
	t.Helper()
	var got []string
	for _, m := range c.messages(transcript) {
		if m.Role == backend.RoleNote {
			got = append(got, m.Content)
		} else {
			t.Errorf("message %d is a %s, want notes only", m.Seq, m.Role)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("notes:\n%q\nwant:\n%q", got, want)
	}
}

func watchKind(t *testing.T, a backend.Admission) string {
	t.Helper()
	var id []string
	if len(a.Identities) != 1 || json.Unmarshal([]byte(a.Identities[0]), &id) != nil || len(id) != 3 {
		t.Fatalf("admission %s: identities %q, want one [kind, watch, event]", a.ID, a.Identities)
	}
	return id[0]
}

// TestWatchLongLineAndFIFO is issue 23, acceptance 4, through the real
// watch plugin and the host: a 9 MiB line without a newline, then matching
// lines: the later matches are offered in order; `(a+)+$` against a 1 MiB
// line "aaa…ab" is no match; a watch of a FIFO is refused by the
// configuration check and never blocks producers run --once.
func TestWatchLongLineAndFIFO(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "watch")
		appLog, reLog := filepath.Join(c.dir, "app.log"), filepath.Join(c.dir, "re.log")
		for _, f := range []string{appLog, reLog} {
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg := filepath.Join(c.dir, "config.yaml")
		writeWatchConfig(t, cfg, fmt.Sprintf(`        - name: app
          path: %s
          pattern: ERROR
          session: s1
        - name: re
          path: %s
          pattern: '(a+)+$'
          session: s1
`, appLog, reLog))
		c.env = append(c.env, "HERMESQ_CONFIG="+cfg)
		c.ok("session", "open", "s1")
		c.ok("producers", "run", "--once") // the watches start at the files' ends

		appendTo(t, appLog, "ERROR before\n"+strings.Repeat("ERROR ", 9<<20/6))
		appendTo(t, reLog, strings.Repeat("a", 1<<20)+"b\n")
		c.ok("producers", "run", "--once")
		appendTo(t, appLog, "\nERROR after 1\nfine\nERROR after 2\n")
		appendTo(t, reLog, "aaa\n")
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1")
		wantNotes(t, c, "s1", []string{
			"[watch] app: ERROR before", "[watch] app: ERROR after 1", "[watch] app: ERROR after 2", "[watch] re: aaa",
		})

		if r := c.run(nil, "doctor"); !strings.Contains(r.stdout, "watch: accepted by the plugin") {
			t.Errorf("doctor with a good watch configuration: %v", r)
		}

		fifo := filepath.Join(c.dir, "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		writeWatchConfig(t, cfg, fmt.Sprintf(`        - name: pipe
          path: %s
          pattern: ERROR
          session: s1
`, fifo))
		r := c.run(nil, "producers", "run", "--once") // c.run fails the test if it hangs
		if r.code == 0 || !strings.Contains(r.stderr, "is a FIFO, not a regular file") {
			t.Errorf("producers run --once with a FIFO watched: want a failure naming the FIFO: %v", r)
		}
		r = c.run(nil, "doctor")
		if r.code == 0 || !regexp.MustCompile(`fail +plugin config +watch: config: watch pipe: path \S+ is a FIFO, not a regular file`).MatchString(r.stdout) {
			t.Errorf("doctor with a FIFO watched: want the plugin's configuration check failed, naming the FIFO: %v", r)
		}
	})
}

func writeWatchConfig(t *testing.T, file, watches string) {
	t.Helper()
	if err := os.WriteFile(file, []byte("producers:\n  watch:\n    config:\n      watches:\n"+watches), 0o600); err != nil {
		t.Fatal(err)
	}
}
