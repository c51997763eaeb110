// Command badproducer is a producer plugin that misbehaves, for the tests of
// the host; what it does depends on the name it is run under, or on the
// "mode" of its configuration ($HERMESQ_PRODUCER_CONFIG) when set:
//
//   - crash exits before the handshake, saying why on stderr;
//   - hang never answers the handshake;
//   - oldproto speaks protocol version 99;
//   - crashpoll serves its outbox but dies in its first poll after
//     claiming (once: a marker file in its state folder remembers it);
//   - hangpoll serves its outbox, but every poll hangs;
//   - hangsettle serves its outbox (coalescing), but every settle hangs;
//   - pollerror fails every poll with an error of its own;
//   - panicpoll panics in its first poll (once, like crashpoll);
//   - badconfig reports a permanent failure (plugin.Fail);
//   - killhost serves its outbox (coalescing if configured with
//     "coalesce": true, as the delegation producer) and, at the first settle
//     that completes a claim, SIGKILLs its host before recording it: an
//     admission made durable whose acknowledgement is lost.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

type crashOnce struct {
	*producer.Outbox
	panics bool
}

func (c crashOnce) Poll(ctx context.Context, req producer.PollRequest) ([]producer.Offer, error) {
	offers, err := c.Outbox.Poll(ctx, req)
	marker := filepath.Join(producer.StateDir(), "crashed")
	if _, serr := os.Stat(marker); len(offers) > 0 && os.IsNotExist(serr) {
		_ = os.WriteFile(marker, nil, 0o600)
		if c.panics {
			panic(fmt.Sprintf("panicking in poll with %d offers claimed", len(offers)))
		}
		producer.Logger().Printf("crashing in poll with %d offers claimed", len(offers))
		os.Exit(2)
	}
	return offers, err
}

type hangPoll struct{ *producer.Outbox }

func (hangPoll) Poll(context.Context, producer.PollRequest) ([]producer.Offer, error) {
	select {}
}

type hangSettle struct{ *producer.Outbox }

func (hangSettle) Settle(context.Context, string, producer.Settlement) error {
	select {}
}

type pollError struct{ *producer.Outbox }

func (pollError) Poll(context.Context, producer.PollRequest) ([]producer.Offer, error) {
	return nil, errors.New("disk on fire")
}

type killHost struct{ *producer.Outbox }

func (k killHost) Settle(ctx context.Context, claim string, s producer.Settlement) error {
	if s.Action == producer.Complete {
		_ = syscall.Kill(os.Getppid(), syscall.SIGKILL)
		time.Sleep(time.Minute) // dies with its host
	}
	return k.Outbox.Settle(ctx, claim, s)
}

func outbox(coalesce bool) *producer.Outbox {
	ob, err := producer.OpenOutbox(producer.StateDir(), producer.OutboxOptions{Coalesce: coalesce})
	if err != nil {
		producer.Logger().Fatal(err)
	}
	return ob
}

func main() {
	mode := strings.TrimPrefix(filepath.Base(os.Args[0]), "hermesq-producer-")
	coalesce := false
	if raw := os.Getenv(producer.EnvConfig); raw != "" {
		var cfg struct {
			Mode     string
			Coalesce bool
		}
		if err := json.Unmarshal([]byte(raw), &cfg); err == nil && cfg.Mode != "" {
			mode, coalesce = cfg.Mode, cfg.Coalesce
		}
	}
	switch mode {
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
		plugin.Serve(crashOnce{Outbox: outbox(false)})
	case "panicpoll":
		plugin.Serve(crashOnce{Outbox: outbox(false), panics: true})
	case "hangpoll":
		plugin.Serve(hangPoll{outbox(false)})
	case "hangsettle":
		plugin.Serve(hangSettle{outbox(true)})
	case "pollerror":
		plugin.Serve(pollError{outbox(false)})
	case "badconfig":
		plugin.Fail(errors.New("configuration: watches[0].path \"log\" is not absolute"))
	case "killhost":
		plugin.Serve(killHost{outbox(coalesce)})
	default:
		fmt.Fprintf(os.Stderr, "badproducer: unknown name %q\n", mode)
		os.Exit(1)
	}
}
