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
// arguments, environment, signals and exit code). Likewise `hermesq top`
// replaces itself with hermesq-top, hermesq with top's terminal view
// (package top/tui: bubbletea, lipgloss), which no other command loads.

// ProducersBinary is the name of the binary that hosts producer plugins;
// TopBinary, of the one that draws `hermesq top`.
const (
	ProducersBinary = "hermesq-producers"
	TopBinary       = "hermesq-top"
)

// siblingDoes says what a sibling binary does, for the error that says it
// is missing.
func siblingDoes(name string) string {
	if name == TopBinary {
		return "draws 'hermesq top'"
	}
	return "runs producer plugins"
}

// PluginClient is a started producer plugin.
type PluginClient = producerhost.Client

// LaunchOptions say how a plugin is started.
type LaunchOptions = producerhost.LaunchOptions

// Launcher starts cmd as a producer plugin. An error with a method
// Permanent() bool that reports true is not retried.
type Launcher = producerhost.Launcher

// execSibling hands this command line to the sibling binary name
// (hermesq-producers or hermesq-top, see Hosts); it returns only on
// failure.
func execSibling(name string) error {
	path, err := siblingPath(name)
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
		return "", fmt.Errorf("%s, which %s, is neither beside this hermesq nor on PATH: "+
			"install it with hermesq (go install github.com/hermesq/hermesq/cmd/...)", name, siblingDoes(name))
	}
	return p, nil
}
