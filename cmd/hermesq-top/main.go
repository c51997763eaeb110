// Command hermesq-top is hermesq with top's terminal view (package
// internal/top/tui: bubbletea, lipgloss): `hermesq top` runs it, and it
// runs every hermesq command the same way. It is a binary of its own so
// that the other commands, which scripts call in loops, do not load a
// terminal library at each start. Install it beside hermesq.
package main

import (
	"github.com/hermesq/hermesq/internal/cli"
	"github.com/hermesq/hermesq/internal/top/tui"
)

func main() { cli.Main(cli.Hosts{Top: tui.Run}) }
