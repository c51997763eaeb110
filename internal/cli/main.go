package cli

import (
	"os"
	"runtime/debug"

	"github.com/hermesq/hermesq/internal/top"
)

// gcPercent is the garbage collector's target unless GOGC says otherwise.
// A drain or a batch allocates and drops records at a high rate while
// holding little (a few MiB live, bounded per step or chunk), so the
// default (collect when the heap doubles) spends much of their CPU in the
// collector and the scavenger; at 4× a drain of notes runs about a third
// faster for about 15 MiB more peak memory (docs/performance.md, "Garbage collection").
const gcPercent = 400

// Hosts are what a binary adds to this package's commands: the producer
// plugin transport (hermesq-producers) and top's terminal view
// (hermesq-top). hermesq itself sets neither, so that the commands scripts
// call in loops start without gRPC or a terminal library; a command whose
// host is missing replaces the process with the binary that has it (same
// arguments, environment, signals and exit code).
type Hosts struct {
	// Launch starts producer plugins (nil: hand `producers run` to
	// hermesq-producers).
	Launch Launcher
	// Top draws `hermesq top` (nil: hand `top` to hermesq-top).
	Top top.View
}

// Main runs one hermesq command line with the process's streams and
// exits with its exit code.
func Main(h Hosts) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	f := NewFactory(System())
	f.Launch, f.Top = h.Launch, h.Top
	err := NewRootCmdFor(f, os.Args[1:]).Execute()
	os.Exit(f.Exit(err))
}
