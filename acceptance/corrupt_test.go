package acceptance

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestCorruptBoltPages: a real bbolt store with one page overwritten by
// garbage (each page in turn) makes no command panic: each exits 0, or 1 with
// one error line (issue 2, acceptance 4: corrupt store file, no panic).
func TestCorruptBoltPages(t *testing.T) {
	path := t.TempDir() + "/hermesq.db"
	c := newCLI(t, "bbolt://"+path)
	for _, s := range []string{"s1", "s2", "s3"} {
		c.admitHuman(s, "hello "+s)
		c.admitAuto(s, "process", "[finished] job of "+s+" (exit 0)", "", `["completion","`+s+`","1"]`)
	}
	c.ok("drain", "--all", "--", "handler")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096 // bbolt's page size: the OS page size on linux/amd64
	pages := len(orig) / page
	if pages > 16 {
		pages = 16
	}
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, page/4)
	cmds := [][]string{
		{"sessions"}, {"export"}, {"queue", "s1", "--status", "queued,running,unknown,done"},
		{"transcript", "s2"}, {"admit", "s3", "--text", "more"}, {"drain", "--all", "--", "handler"},
	}
	for p := 0; p < pages; p++ {
		data := append([]byte{}, orig...)
		copy(data[p*page:], garbage)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range cmds {
			r := c.run(nil, args...)
			switch {
			case strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine "):
				t.Errorf("page %d overwritten: panicked: %v", p, r)
			case r.code == 0:
			case r.code == 1:
				if err := oneLineError(r.stderr, false); err != nil {
					t.Errorf("page %d overwritten: hermesq %s: %v", p, strings.Join(args, " "), err)
				}
			default:
				t.Errorf("page %d overwritten: want exit 0 or 1: %v", p, r)
			}
		}
	}
}

// TestCorruptBoltFileNamesDoctor (issue 11, acceptance 6): a truncated or
// corrupt bbolt file makes every command exit 1 with one error line naming
// the file and doctor, no panic trace; the file is left as it was (never
// silently re-created); doctor reports it and exits 1.
func TestCorruptBoltFileNamesDoctor(t *testing.T) {
	path := t.TempDir() + "/hermesq.db"
	c := newCLI(t, "bbolt://"+path)
	c.admitHuman("s1", "hello")
	c.ok("drain", "--all", "--", "handler")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte{0x5a}, 8192)
	broken := map[string][]byte{
		"empty":              {},
		"truncated to 100":   orig[:100],
		"truncated to 5000":  orig[:5000],
		"truncated to half":  orig[:len(orig)/2],
		"header overwritten": append(append([]byte{}, garbage...), orig[len(garbage):]...),
	}
	cmds := [][]string{
		{"sessions"}, {"admit", "s1", "--text", "more"}, {"export"}, {"drain", "--all", "--", "handler"},
		{"session", "show", "s1"}, {"-o", "json", "queue", "s1"},
	}
	for name, data := range broken {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range cmds {
			r := c.run(nil, args...)
			if r.code != 1 {
				t.Errorf("%s: want exit 1: %v", name, r)
				continue
			}
			json := len(args) > 0 && args[0] == "-o"
			if err := oneLineError(r.stderr, json); err != nil {
				t.Errorf("%s: hermesq %s: %v", name, strings.Join(args, " "), err)
			}
			for _, want := range []string{path, "doctor"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%s: hermesq %s: stderr does not name %q: %s", name, strings.Join(args, " "), want, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("%s: panic trace: %v", name, r)
			}
		}
		if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, data) {
			t.Errorf("%s: the store file was changed (re-created?): %d bytes, was %d", name, len(now), len(data))
		}
		r := c.run(nil, "doctor")
		if r.code != 1 || !strings.Contains(r.stdout, "fail") || !strings.Contains(r.stdout, path) || !strings.Contains(r.stdout, "corrupt") {
			t.Errorf("%s: doctor does not report the corrupt file: %v", name, r)
		}
		if err := oneLineError(r.stderr, false); err != nil {
			t.Errorf("%s: doctor: %v", name, err)
		}
	}
	// The intact file again: doctor is content.
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := c.ok("doctor"); !strings.Contains(r.stdout, "consistency") || strings.Contains(r.stdout, "fail") {
		t.Errorf("doctor on an intact store: %v", r)
	}
}
