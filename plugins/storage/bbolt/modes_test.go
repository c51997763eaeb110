package bbolt

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// The store file is created 0600 and its folders 0700, even under a umask
// that would allow more (docs/contract.md §10): the file's mode is what keeps
// other users out of a file store.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	path := filepath.Join(root, "state", "hermesq", "hermesq.db")
	s, err := Open(context.Background(), path, backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenSession(context.Background(), backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		path:                             0o600,
		filepath.Dir(path):               0o700,
		filepath.Dir(filepath.Dir(path)): 0o700,
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries { // the lock file, if any, too
		if _, ok := want[filepath.Join(filepath.Dir(path), e.Name())]; !ok && !e.IsDir() {
			want[filepath.Join(filepath.Dir(path), e.Name())] = 0o600
		}
	}
	for p, m := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != m {
			t.Errorf("%s: mode %04o, want %04o", p, got, m)
		}
	}
}
