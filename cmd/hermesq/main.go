// Command hermesq keeps durable per-session FIFO queues of inputs for
// conversational agents. See `hermesq --help` and man/man1/hermesq.1.
package main

import (
	"os"
	"runtime/debug"

	"github.com/hermesq/hermesq/internal/cli"
)

// gcPercent is the garbage collector's target unless GOGC says otherwise.
// A drain or a batch allocates and drops records at a high rate while
// holding little (a few MiB live, bounded per step or chunk), so the
// default (collect when the heap doubles) spends much of their CPU in the
// collector and the scavenger; at 4× a drain of notes runs about a third
// faster for about 15 MiB more peak memory (README, "Performance").
const gcPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	f := cli.NewFactory(cli.System())
	err := cli.NewRootCmd(f).Execute()
	os.Exit(f.Exit(err))
}
