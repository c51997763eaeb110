//go:build linux

package admission

import "syscall"

// setDeathSignal has the kernel SIGKILL the handler when the thread that
// started it ends: a drainer killed with SIGKILL takes its handler with it
// instead of leaving an orphan that could act after the lease expired.
// (The handler's own children are killed with its group on every exit path
// of a live drainer; after a SIGKILL of the drainer they get nothing.)
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
