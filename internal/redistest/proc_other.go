//go:build !linux

package redistest

import "syscall"

// dieWithParent: only Linux can tie a child's life to its parent's; a
// server of a test killed hard outlives it elsewhere (Cleanup stops it
// otherwise).
func dieWithParent() *syscall.SysProcAttr { return nil }
