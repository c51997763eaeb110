//go:build !linux

package producerhost

import "os/exec"

// dieWithParent: outside Linux there is no parent-death signal; the host
// ends its plugins whenever it exits normally (go-plugin's Kill), but a
// plugin may outlive a host killed with SIGKILL.
func dieWithParent(*exec.Cmd) {}
