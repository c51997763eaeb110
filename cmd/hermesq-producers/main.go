// Command hermesq-producers is hermesq with the producer plugin host:
// `hermesq producers run` runs it, and it runs every hermesq command the
// same way. It is a binary of its own so that the other commands, which
// scripts call in loops, do not load the plugin transport (gRPC, protocol
// buffers) at each start. Install it beside hermesq.
package main

import (
	"os/exec"

	"github.com/hermesq/hermesq/internal/cli"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

func main() { cli.Main(cli.Hosts{Launch: launch}) }

// launch starts a producer plugin over go-plugin's gRPC transport.
func launch(cmd *exec.Cmd, o cli.LaunchOptions) (cli.PluginClient, error) {
	c, err := plugin.Start(cmd, plugin.StartOptions{Pin: o.Pin, StartTimeout: o.StartTimeout, Output: o.Output})
	if err != nil {
		return nil, err
	}
	return c, nil
}
