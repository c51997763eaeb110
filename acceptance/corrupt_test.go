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
