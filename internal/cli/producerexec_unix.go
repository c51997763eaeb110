//go:build unix

package cli

import (
	"os"
	"syscall"
)

// execInto replaces this process with the program at path, given the
// same arguments and environment; it returns only on failure.
func execInto(path string) error {
	return syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ())
}
