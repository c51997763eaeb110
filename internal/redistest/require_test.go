package redistest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRequireHelper is run by TestRequireNeverSkipsSilently in a child
// process whose PATH has no redis-server.
func TestRequireHelper(t *testing.T) {
	if os.Getenv("REDISTEST_REQUIRE_HELPER") != "1" {
		t.Skip("helper process only")
	}
	Require(t)
	t.Log("REQUIRE PASSED")
}

// A test needing Redis on a machine without redis-server fails, unless
// HERMESQ_SKIP_REDIS=1 asks for a skip, which is announced; CI=true fails
// even then.
func TestRequireNeverSkipsSilently(t *testing.T) {
	cases := []struct {
		name     string
		env      []string
		wantFail bool
		want     string
	}{
		{"plain", nil, true, "redis-server is not installed"},
		{"ci", []string{"CI=true"}, true, "redis-server is not installed"},
		{"skip asked", []string{"HERMESQ_SKIP_REDIS=1"}, false, "the Redis store is NOT tested"},
		{"skip asked in ci", []string{"HERMESQ_SKIP_REDIS=1", "CI=true"}, true, "redis-server is not installed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRequireHelper$", "-test.v", "-test.count=1")
			env := []string{"REDISTEST_REQUIRE_HELPER=1", "PATH=" + t.TempDir(), "HOME=" + os.Getenv("HOME")}
			cmd.Env = append(env, tc.env...)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("failed=%v, want %v:\n%s", failed, tc.wantFail, out)
			}
			if !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "REQUIRE PASSED") {
				t.Errorf("output lacks %q (or Require passed):\n%s", tc.want, out)
			}
			if !tc.wantFail && !strings.Contains(string(out), "SKIPPING EVERY TEST THAT NEEDS REDIS") {
				t.Errorf("the skip was not announced on stderr:\n%s", out)
			}
		})
	}
}
