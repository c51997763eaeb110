//go:build unix

package cli

import (
	"fmt"
	"os"
	"syscall"
)

// execProducers replaces this process with hermesq-producers, given the
// same arguments and environment; it returns only on failure.
func execProducers() error {
	path, err := siblingPath(ProducersBinary)
	if err != nil {
		return &runError{err}
	}
	argv := append([]string{path}, os.Args[1:]...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return &runError{fmt.Errorf("run %s: %w", path, err)}
	}
	return nil
}
