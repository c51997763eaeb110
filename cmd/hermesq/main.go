// Command hermesq keeps durable per-session FIFO queues of inputs for
// conversational agents. See `hermesq --help` and man/man1/hermesq.1.
package main

import "github.com/hermesq/hermesq/internal/cli"

func main() { cli.Main(cli.Hosts{}) }
