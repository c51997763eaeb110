package cli

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// export --file by what the path names: a regular file, or a symlink to
// one, is replaced whole (the symlink kept, its target replaced); a path
// not there is created; a FIFO, a device, an open descriptor (/dev/fd/N,
// as a shell's >(cmd)) is written into, a write error reported (exit 1)
// and the device left a device; a directory or a socket is refused (exit
// 2) and left as it is.
func TestExportFileKinds(t *testing.T) {
	e := newEnv(t)
	e.ok("admit", "s1", "--text", "one")
	e.ok("admit", "s1", "--text", "two")
	want := e.export()
	dir := t.TempDir()
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("regular file", func(t *testing.T) {
		p := filepath.Join(dir, "backup.ndjson")
		writeFile(t, p, "old content\n")
		e.run("export", "--file", p).wantExit(t, ExitOK)
		if got := read(p); got != want {
			t.Errorf("file holds %q, want the export", got)
		}
	})
	t.Run("new file", func(t *testing.T) {
		p := filepath.Join(dir, "new.ndjson")
		e.run("export", "--file", p).wantExit(t, ExitOK)
		if got := read(p); got != want {
			t.Errorf("file holds %q, want the export", got)
		}
	})
	t.Run("symlink to a regular file", func(t *testing.T) {
		target := filepath.Join(dir, "target.ndjson")
		writeFile(t, target, "old content\n")
		link := filepath.Join(dir, "link.ndjson")
		if err := os.Symlink("target.ndjson", link); err != nil {
			t.Fatal(err)
		}
		e.run("export", "--file", link).wantExit(t, ExitOK)
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the symlink is gone: %v, %v", fi, err)
		}
		if got := read(target); got != want {
			t.Errorf("the symlink's target holds %q, want the export", got)
		}
	})
	t.Run("fifo", func(t *testing.T) {
		p := filepath.Join(dir, "fifo")
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			fh, err := os.Open(p)
			if err != nil {
				got <- err.Error()
				return
			}
			defer fh.Close()
			b, _ := io.ReadAll(fh)
			got <- string(b)
		}()
		e.run("export", "--file", p).wantExit(t, ExitOK)
		select {
		case s := <-got:
			if s != want {
				t.Errorf("the FIFO's reader got %q, want the export", s)
			}
		case <-time.After(20 * time.Second): // a hang guard: a replaced FIFO leaves its reader waiting
			t.Errorf("the FIFO's reader got nothing")
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("the FIFO was replaced: %v, %v", fi, err)
		}
	})
	t.Run("open descriptor", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(r)
			got <- string(b)
		}()
		e.run("export", "--file", "/dev/fd/"+strconv.Itoa(int(w.Fd()))).wantExit(t, ExitOK)
		w.Close()
		if s := <-got; s != want {
			t.Errorf("the pipe's reader got %q, want the export", s)
		}
	})
	// As root, nodes of /dev/full's and /dev/null's numbers in the temp
	// dir (the real ones are never at risk, whatever the code under test
	// does); otherwise the real ones, which only root could replace.
	device := func(name string, minor uint32) string {
		t.Helper()
		if os.Geteuid() != 0 {
			return "/dev/" + name
		}
		p := filepath.Join(dir, name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, minor))); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stillDevice := func(p string) {
		t.Helper()
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("%s is no longer a character device: %v, %v", p, fi, err)
		}
	}
	t.Run("full device", func(t *testing.T) {
		p := device("full", 7)
		r := e.run("export", "--file", p).wantExit(t, ExitFailure)
		contains(t, "stderr", r.err, "no space left on device")
		stillDevice(p)
	})
	t.Run("null device", func(t *testing.T) {
		p := device("null", 3)
		e.run("export", "--file", p).wantExit(t, ExitOK)
		stillDevice(p)
	})
	t.Run("directory", func(t *testing.T) {
		p := filepath.Join(dir, "adir")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		r := e.run("export", "--file", p).wantExit(t, ExitUsage)
		contains(t, "stderr", r.err, "a directory: want a regular file")
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			t.Errorf("the directory was replaced: %v, %v", fi, err)
		}
	})
	t.Run("socket", func(t *testing.T) {
		p := filepath.Join(dir, "sock")
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		r := e.run("export", "--file", p).wantExit(t, ExitUsage)
		contains(t, "stderr", r.err, "a socket: want a regular file")
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("the socket was replaced: %v, %v", fi, err)
		}
	})
}
