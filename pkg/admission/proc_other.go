//go:build !unix

package admission

import (
	"io"
	"os"
	"os/exec"
)

// setProcessGroup: without process groups, the handler is started alone.
func setProcessGroup(cmd *exec.Cmd) {}

// killGroup: without process groups, the handler process itself is killed.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// readBuffered: a pipe that cannot be read without waiting is not read.
func readBuffered(*os.File, io.Writer, []byte) {}
