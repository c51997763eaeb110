package acceptance

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinariesKeepOnlyMethodsTheyCall holds hermesq and hermesq-top, which
// scripts and terminals start often, to the linker's dead-method pruning.
// When code that looks a method up by a name known only at run time is
// linked (text/template executing a template, as cobra's SetVersionTemplate
// does), the linker keeps every exported method of every type in the
// binary: go-redis's whole command set, for one, which hermesq never calls
// most of, and each start then maps and faults in a larger binary. GEOADD
// stands for that set.
func TestBinariesKeepOnlyMethodsTheyCall(t *testing.T) {
	dir, err := buildAll()
	if err != nil {
		t.Fatal(err)
	}
	const unused = "github.com/redis/go-redis/v9.cmdable.GeoAdd"
	for _, name := range []string{"hermesq", "hermesq-top"} {
		out, err := exec.Command("go", "tool", "nm", filepath.Join(dir, name)).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", name, err)
		}
		if !strings.Contains(string(out), "github.com/redis/go-redis/v9.") {
			t.Fatalf("%s links no go-redis at all: the check below would prove nothing", name)
		}
		if strings.Contains(string(out), unused) {
			t.Errorf("%s links %s, which nothing calls: something reachable looks methods up by a run-time name, so the linker kept every exported method", name, unused)
		}
	}
}
