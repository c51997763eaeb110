// Command badproducer is a producer plugin that misbehaves, for the tests of
// the host; what it does depends on the name it is run under:
// hermesq-producer-crash exits before the handshake, -hang never answers
// it, -oldproto speaks protocol version 99, and -crashpoll serves its
// outbox but dies in its first poll after claiming (once: a marker file in
// its state folder remembers it).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

type crashOnce struct{ *producer.Outbox }

func (c crashOnce) Poll(ctx context.Context, max int) ([]producer.Offer, error) {
	offers, err := c.Outbox.Poll(ctx, max)
	marker := filepath.Join(producer.StateDir(), "crashed")
	if _, serr := os.Stat(marker); len(offers) > 0 && os.IsNotExist(serr) {
		_ = os.WriteFile(marker, nil, 0o600)
		producer.Logger().Printf("crashing in poll with %d offers claimed", len(offers))
		os.Exit(2)
	}
	return offers, err
}

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "hermesq-producer-")
	switch name {
	case "crash":
		fmt.Fprintln(os.Stderr, "crash: giving up before the handshake")
		os.Exit(1)
	case "hang":
		time.Sleep(time.Hour)
	case "oldproto":
		hs := plugin.Handshake
		hs.ProtocolVersion = 99
		goplugin.Serve(&goplugin.ServeConfig{
			HandshakeConfig: hs,
			Plugins:         plugin.Set(nil),
			GRPCServer:      goplugin.DefaultGRPCServer,
		})
	case "crashpoll":
		ob, err := producer.OpenOutbox(producer.StateDir(), producer.OutboxOptions{})
		if err != nil {
			producer.Logger().Fatal(err)
		}
		plugin.Serve(crashOnce{ob})
	default:
		fmt.Fprintf(os.Stderr, "badproducer: unknown name %q\n", name)
		os.Exit(1)
	}
}
