package cli

import (
	"os"
	"runtime/debug"
)

// gcPercent is the garbage collector's target unless GOGC says otherwise.
// A drain or a batch allocates and drops records at a high rate while
// holding little (a few MiB live, bounded per step or chunk), so the
// default (collect when the heap doubles) spends much of their CPU in the
// collector and the scavenger; at 4× a drain of notes runs about a third
// faster for about 15 MiB more peak memory (docs/performance.md, "Garbage collection").
const gcPercent = 400

// Main runs one hermesq command line with the process's streams and
// exits with its exit code. launch starts producer plugins (nil in
// hermesq, which hands producers run to hermesq-producers).
func Main(launch Launcher) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	f := NewFactory(System())
	f.Launch = launch
	err := NewRootCmd(f).Execute()
	os.Exit(f.Exit(err))
}
