package cli

import (
	"os/exec"

	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

// testLaunch starts producer plugins in the tests, as hermesq-producers
// does (cmd/hermesq-producers): the tests run the host in process.
func testLaunch(cmd *exec.Cmd, o LaunchOptions) (PluginClient, error) {
	c, err := plugin.Start(cmd, plugin.StartOptions{Pin: o.Pin, StartTimeout: o.StartTimeout, Output: o.Output})
	if err != nil {
		return nil, err
	}
	return c, nil
}
