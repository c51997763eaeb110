package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hermesq/hermesq/internal/producerhost"
)

// The producer plugin host runs in a second binary, hermesq-producers,
// installed beside hermesq: it is hermesq with a Launcher (the go-plugin
// gRPC transport, package producer/plugin). Every other command is spared
// loading gRPC and protocol buffers at each start; `hermesq producers run`
// replaces itself with `hermesq-producers producers run …` (same process,
// arguments, environment, signals and exit code).

// ProducersBinary is the name of the binary that hosts producer plugins.
const ProducersBinary = "hermesq-producers"

// PluginClient is a started producer plugin.
type PluginClient = producerhost.Client

// LaunchOptions say how a plugin is started.
type LaunchOptions = producerhost.LaunchOptions

// Launcher starts cmd as a producer plugin. An error with a method
// Permanent() bool that reports true is not retried.
type Launcher = producerhost.Launcher

// execProducers hands this command line to hermesq-producers (see
// above); it returns only on failure.
func execProducers() error {
	path, err := siblingPath(ProducersBinary)
	if err != nil {
		return &runError{err}
	}
	if err := execInto(path); err != nil {
		return &runError{fmt.Errorf("run %s: %w", path, err)}
	}
	return nil
}

// siblingPath finds name beside the running executable, else on PATH.
func siblingPath(name string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		p := filepath.Join(filepath.Dir(exe), name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s, which runs producer plugins, is neither beside this hermesq nor on PATH: "+
			"install it with hermesq (go install github.com/hermesq/hermesq/cmd/...)", name)
	}
	return p, nil
}
