// Command hermesq keeps durable per-session FIFO queues of inputs for
// conversational agents. See `hermesq --help` and man/man1/hermesq.1.
package main

import (
	"os"

	"github.com/hermesq/hermesq/internal/cli"
)

func main() {
	f := cli.NewFactory(cli.System())
	err := cli.NewRootCmd(f).Execute()
	os.Exit(f.Exit(err))
}
