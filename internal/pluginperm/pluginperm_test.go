package pluginperm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// A plugin folder or binary writable by group or others is refused
// (ErrForbidden, saying how to repair); 0700 and 0755 are fine.
func TestCheck(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins")
	if err := os.Mkdir(dir, DirMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, DirMode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hermesq-producer-x")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	chmod := func(p string, m os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []os.FileMode{0o700, 0o755, 0o500} {
		chmod(bin, m)
		if err := Check(dir, bin); err != nil {
			t.Errorf("binary mode %04o: %v", m, err)
		}
	}
	for _, m := range []os.FileMode{0o770, 0o775, 0o702, 0o777, 0o720} {
		chmod(bin, m)
		err := Check(dir, bin)
		if !errors.Is(err, backend.ErrForbidden) || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("binary mode %04o: %v, want refused with the repair", m, err)
		}
	}
	chmod(bin, 0o700)
	for _, m := range []os.FileMode{0o770, 0o777, 0o703} {
		chmod(dir, m)
		if err := Check(dir, bin); !errors.Is(err, backend.ErrForbidden) || !strings.Contains(err.Error(), "plugin folder") {
			t.Errorf("folder mode %04o: %v, want refused", m, err)
		}
	}
	chmod(dir, DirMode)
	chmod(bin, 0o600)
	if err := CheckBinary(bin); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("not executable: %v", err)
	}
	if err := CheckBinary(dir); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("a directory as binary: %v", err)
	}
	if err := CheckDir(bin); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("a file as folder: %v", err)
	}
	if err := CheckBinary(filepath.Join(dir, "missing")); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("missing binary: %v", err)
	}
	// A symlink is judged by its target.
	chmod(bin, 0o777)
	link := filepath.Join(dir, "hermesq-producer-link")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckBinary(link); !errors.Is(err, backend.ErrForbidden) {
		t.Errorf("symlink to a world-writable binary: %v", err)
	}
}
