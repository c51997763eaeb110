package acceptance

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBoundedFileReads (issue 24, item 4): every file read whole from a
// path a user names is read with a bound: --config /dev/zero and the TLS
// files of a rediss:// URL (ca=, cert=, key=) naming /dev/zero are refused
// at once (exit 2, naming the file and the limit), and so is an import
// whose line never ends, under a memory limit that reading them whole
// would exceed, instead of running out of memory.
func TestBoundedFileReads(t *testing.T) {
	c := newCLI(t, "bbolt:///nonexistent/never-opened.db")
	cases := [][]string{
		{"--config", "/dev/zero", "queue", "s1"},
		{"--store", "rediss://127.0.0.1:1/0?ca=/dev/zero", "queue", "s1"},
		{"--store", "rediss://127.0.0.1:1/0?cert=/dev/zero&key=/dev/null", "queue", "s1"},
		{"--store", "rediss://127.0.0.1:1/0?cert=/dev/null&key=/dev/zero", "queue", "s1"},
		{"--store", "rediss://127.0.0.1:1/0?ca=/dev/zero", "doctor"},
		{"import", "--file", "/dev/zero"},
	}
	for _, args := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		// 2 GiB of address space: enough for hermesq, not for /dev/zero.
		cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v 2097152 && exec "$0" "$@"`, c.bin}, args...)...)
		cmd.Env, cmd.Dir = c.env, c.dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		code := exitCode(err)
		if timedOut {
			t.Errorf("hermesq %s: still reading after 60 s", strings.Join(args, " "))
			continue
		}
		wantCode := 2
		if args[len(args)-1] == "doctor" {
			wantCode = 1 // doctor reports the failed check on stdout, exit 1
		}
		want := "/dev/zero is larger than the limit of 1048576 bytes"
		if args[0] == "import" {
			want = "line 1: line longer than 8388608 bytes"
		}
		all := out.String() + errb.String()
		if code != wantCode || !strings.Contains(all, want) {
			t.Errorf("hermesq %s: exit %d, want %d naming the file and the limit\nstdout: %s\nstderr: %s",
				strings.Join(args, " "), code, wantCode, abbrev(out.String()), abbrev(errb.String()))
		}
	}
}
