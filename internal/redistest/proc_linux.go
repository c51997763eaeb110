package redistest

import "syscall"

// dieWithParent has a server started for a test killed with the test
// process, however it ends.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
