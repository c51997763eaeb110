//go:build !unix

package cli

import (
	"errors"
	"os"
	"os/exec"
)

// execInto runs the program at path with the same arguments, environment
// and streams, and exits with its exit code; it returns only on failure.
func execInto(path string) error {
	cmd := exec.Command(path, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	}
	return err
}
