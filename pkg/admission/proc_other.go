//go:build !unix

package admission

import "os/exec"

// setProcessGroup: without process groups, cancellation kills the handler
// process itself (exec's default).
func setProcessGroup(cmd *exec.Cmd) {}

// killGroup: without process groups there is nothing left to kill.
func killGroup(cmd *exec.Cmd) {}
