//go:build !unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// execProducers runs hermesq-producers with the same arguments and
// environment, and exits with its exit code.
func execProducers() error {
	path, err := siblingPath(ProducersBinary)
	if err != nil {
		return &runError{err}
	}
	cmd := exec.Command(path, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	}
	return &runError{fmt.Errorf("run %s: %w", path, err)}
}
