package producerhost

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
	redisstore "github.com/hermesq/hermesq/plugins/storage/redis"
)

// testLaunch starts producer plugins in the tests, as hermesq-producers
// does (cmd/hermesq-producers).
func testLaunch(cmd *exec.Cmd, o LaunchOptions) (Client, error) {
	c, err := plugin.Start(cmd, plugin.StartOptions{Pin: o.Pin, StartTimeout: o.StartTimeout, Output: o.Output})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// openStore opens a bbolt:// or redis:// store.
func openStore(ctx context.Context, raw string) (backend.Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	opts := backend.Options{Timeout: 30 * time.Second}
	switch {
	case strings.HasPrefix(raw, "bbolt://"):
		return boltstore.Opener(ctx, u, opts)
	case strings.HasPrefix(raw, "redis://"):
		return redisstore.Opener(ctx, u, opts)
	}
	return nil, fmt.Errorf("store %q", raw)
}
