package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/internal/redistest"
)

// Issue 9, acceptance 6: `hermesq drain <TAB>` lists the store's sessions
// and `hermesq show <TAB>` its admission ids, driven through cobra's
// __complete on bbolt and on a real Redis; a bbolt file that does not exist
// completes nothing and is not created.
func TestDynamicCompletion(t *testing.T) {
	for _, store := range []string{"bbolt", "redis"} {
		t.Run(store, func(t *testing.T) {
			e := newEnv(t)
			if store == "redis" {
				e.store = redistest.Start(t).FreshURL()
			}
			a := decode[admitOut](t, e.ok("-o", "json", "admit", "alpha", "--text", "one")).Admission.ID
			e.ok("admit", "beta.2", "--text", "two")
			e.ok("session", "open", "gamma")

			r := e.ok("__complete", "drain", "")
			if !strings.HasPrefix(r.out, "alpha\tidle, depth 1\nbeta.2\t") || !strings.Contains(r.out, "\ngamma\t") || !strings.HasSuffix(r.out, ":4\n") {
				t.Errorf("drain <TAB>:\n%s", r.out)
			}
			r = e.ok("__complete", "drain", "b")
			if strings.Contains(r.out, "alpha") || !strings.Contains(r.out, "beta.2\t") {
				t.Errorf("drain b<TAB>:\n%s", r.out)
			}
			r = e.ok("__complete", "show", a[:3])
			if !strings.HasPrefix(r.out, a+"\talpha #") {
				t.Errorf("show <TAB>:\n%s", r.out)
			}
			r = e.ok("__complete", "replay", "--session", "g")
			if !strings.HasPrefix(r.out, "gamma\t") {
				t.Errorf("replay --session <TAB>:\n%s", r.out)
			}
			// Only the first argument is a session.
			if r = e.ok("__complete", "queue", "alpha", ""); strings.Contains(r.out, "beta") {
				t.Errorf("queue alpha <TAB>:\n%s", r.out)
			}
		})
	}
}

func TestCompletionWithoutStore(t *testing.T) {
	e := newEnv(t)
	e.store = "bbolt://" + e.dir + "/absent/x.db"
	if r := e.ok("__complete", "drain", ""); r.out != ":4\n" {
		t.Errorf("drain <TAB> without a store:\n%s", r.out)
	}
	if r := e.ok("__complete", "show", ""); r.out != ":4\n" {
		t.Errorf("show <TAB> without a store:\n%s", r.out)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "absent")); !os.IsNotExist(err) {
		t.Error("completion created the store's directory")
	}
}
