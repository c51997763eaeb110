package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	// Not a terminal: never drawn.
	p := &progress{w: &buf, on: false, verb: "exported"}
	p.add(5)
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("progress without a terminal: %q", buf.String())
	}
	// A terminal, due at once: drawn with the count, ended with a newline.
	p = &progress{w: &buf, on: true, verb: "exported"}
	p.add(1)
	p.add(2)
	p.done()
	out := buf.String()
	if !strings.Contains(out, "hermesq: exported") || !strings.Contains(out, "(3/") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("progress on a terminal: %q", out)
	}
	// A terminal, short work: nothing.
	buf.Reset()
	e := newEnv(t)
	e.ok("admit", "s1", "--text", "x")
	r := e.runWith("", true, "export")
	if r.code != 0 || r.err != "" {
		t.Fatalf("short export on a terminal: exit %d, stderr %q", r.code, r.err)
	}
}
