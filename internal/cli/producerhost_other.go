//go:build !linux

package cli

import "os/exec"

// dieWithParent: outside Linux there is no parent-death signal; go-plugin
// ends its plugins when the host exits normally, and a plugin whose host
// was killed exits when its gRPC connection breaks.
func dieWithParent(*exec.Cmd) {}
