//go:build unix && !linux

package admission

import "syscall"

// setDeathSignal: only Linux can tie a child's life to its parent's; on
// other systems a handler whose drainer was killed with SIGKILL runs on
// until it ends (its admission is then unknown, never settled twice).
func setDeathSignal(*syscall.SysProcAttr) {}
