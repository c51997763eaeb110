package acceptance

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDemo runs the README demo (examples/demo.sh) as a user would, with only
// Go on PATH besides the shell's tools: it must show a turn, a note, the
// viewer's turn and the duplicate re-offer.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries again; -short skips it")
	}
	cmd := exec.Command("bash", "examples/demo.sh")
	cmd.Dir = ".."
	env := []string{"TMPDIR=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMESQ_") && !strings.HasPrefix(kv, "XDG_") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash examples/demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		"turn ", "note ", // the drain: a turn, then a note
		"echo: hello: is the build green? (notes seen: 0)",
		"[finished] make test (exit 0)",
		"echo: [finished] make lint (exit 0) (notes seen: 1)", // the viewer's turn
		"duplicate ",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
