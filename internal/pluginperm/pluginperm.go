// Package pluginperm checks that a plugin folder and the binaries in it
// can be changed by no one but their owner before hermesq executes them: a
// folder or binary writable by group or others, or owned by another user
// (root excepted), would let someone else run code as the caller.
package pluginperm

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/hermesq/hermesq/pkg/backend"
)

// DirMode is the mode hermesq creates plugin and state folders with.
const DirMode = 0o700

// CheckDir checks a plugin folder: a directory (a symlink is followed and
// its target checked), not writable by group or others, owned by the
// calling user or root. The error wraps backend.ErrForbidden and says how
// to repair.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("plugin folder %s: %v: %w", dir, err, backend.ErrInvalid)
	}
	if !fi.IsDir() {
		return fmt.Errorf("plugin folder %s is not a directory: %w", dir, backend.ErrInvalid)
	}
	return checkOwnerAndMode("plugin folder", dir, fi)
}

// CheckBinary checks a plugin binary: a regular, executable file (a
// symlink is followed and its target checked), not writable by group or
// others, owned by the calling user or root.
func CheckBinary(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("plugin binary %s: %v: %w", path, err, backend.ErrInvalid)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("plugin binary %s is not a regular file: %w", path, backend.ErrInvalid)
	}
	if fi.Mode().Perm()&0o100 == 0 {
		return fmt.Errorf("plugin binary %s is not executable by its owner (mode %04o): %w", path, fi.Mode().Perm(), backend.ErrInvalid)
	}
	return checkOwnerAndMode("plugin binary", path, fi)
}

// Check checks a plugin binary and the folder it is in.
func Check(dir, binary string) error {
	if err := CheckDir(dir); err != nil {
		return err
	}
	return CheckBinary(binary)
}

func checkOwnerAndMode(what, path string, fi fs.FileInfo) error {
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("%s %s is writable by group or others (mode %04o), so it is not run: chmod go-w %s: %w",
			what, path, m, path, backend.ErrForbidden)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := int(st.Uid); uid != os.Getuid() && uid != 0 {
			return fmt.Errorf("%s %s is owned by uid %d, not by the caller (uid %d) or root, so it is not run: chown it: %w",
				what, path, uid, os.Getuid(), backend.ErrForbidden)
		}
	}
	return nil
}
