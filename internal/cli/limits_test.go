package cli

import (
	"strings"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// help limits lists every input limit of pkg/backend with its value.
func TestHelpLimits(t *testing.T) {
	e := newEnv(t)
	r := e.ok("help", "limits")
	for _, l := range backend.Limits() {
		if !strings.Contains(r.out, l.Name) || !strings.Contains(r.out, l.Value) {
			t.Errorf("help limits lacks %q = %q:\n%s", l.Name, l.Value, r.out)
		}
	}
	for _, v := range []string{"256", "1024", "1000", "1048576", "4194304", "8388608", "2048", "2000"} {
		if !strings.Contains(r.out, v) {
			t.Errorf("help limits does not give %s", v)
		}
	}
}
