// Package plugin is the transport of hermesq producer plugins: go-plugin
// over gRPC with mutual TLS. A plugin serves its producer.Producer with
// Serve; the host (hermesq-producers, which `hermesq producers run` runs)
// starts plugins with Start. It is kept out of package producer so that a
// program that only writes events to an outbox does not link gRPC and
// protocol buffers.
package plugin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/hermesq/hermesq/pkg/producer"
)

// Handshake is the go-plugin handshake of producer plugins. ProtocolVersion
// changes when the wire protocol does; the host refuses a plugin of another
// version.
//
// Version 2: a poll carries the store's payload limit, an offer its
// attempts, a settle retry or reject (release, defer and drop are gone)
// with a not-before time; events are never dropped on the host's word.
// Added within version 2: SettleBatch (a poll's claims settled in one call)
// and the time the plugin served each call; the host settles a plugin
// built before them with a Settle a claim, and counts its calls as rpc.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  2,
	MagicCookieKey:   "HERMESQ_PRODUCER_PLUGIN",
	MagicCookieValue: "f4d1c1a0-producer-v1",
}

// Name is the name under which a plugin serves its Producer.
const Name = "producer"

// stderr is the plugin's own stderr, kept before go-plugin redirects
// os.Stderr into its stdio stream.
var stderr io.Writer = os.Stderr

// Serve serves p as a producer plugin over gRPC and returns when the host
// ends the plugin. It must be called from main, once. Run directly (not by
// hermesq) it prints that it is a plugin and exits 1.
func Serve(p producer.Producer) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         Set(p),
		GRPCServer:      goplugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "go-plugin",
			Level:  hclog.Warn,
			Output: stderr,
		}),
	})
}

// Fail serves a plugin that cannot work, such as one whose configuration
// is wrong: every poll returns err as a permanent failure, so the host
// shows err's message, does not start the plugin again, and producers run
// exits 8. Like Serve, it must be called from main, once.
//
//	cfg, err := parseConfig(os.Getenv(producer.EnvConfig))
//	if err != nil {
//		plugin.Fail(fmt.Errorf("configuration: %w", err))
//		return
//	}
func Fail(err error) { Serve(failed{producer.Permanent(err)}) }

// failed is the Producer of a plugin that cannot work.
type failed struct{ err error }

func (f failed) Poll(context.Context, producer.PollRequest) ([]producer.Offer, error) {
	return nil, f.err
}

func (f failed) Settle(context.Context, string, producer.Settlement) error {
	return producer.ErrUnknownClaim
}

// Set is the go-plugin plugin map of producers. A plugin serves impl
// under Name (Serve does this); the host passes nil and dispenses Name, a
// producer.Producer whose calls go to the plugin over gRPC.
func Set(impl producer.Producer) goplugin.PluginSet {
	return goplugin.PluginSet{Name: &grpcPlugin{impl: impl}}
}

// StartOptions steer Start.
type StartOptions struct {
	// Pin, when set, is the SHA-256 the plugin binary must have: checked
	// before it is started.
	Pin []byte
	// StartTimeout bounds the handshake.
	StartTimeout time.Duration
	// Output receives the plugin's stdout and stderr lines and go-plugin's
	// own errors.
	Output io.Writer
}

// Client is a producer plugin started by Start.
type Client struct {
	c *goplugin.Client
	p producer.Producer
}

// Producer is the plugin's Producer: its calls go to the plugin over gRPC.
func (c *Client) Producer() producer.Producer { return c.p }

// Exited reports whether the plugin process has ended.
func (c *Client) Exited() bool { return c.c.Exited() }

// Kill ends the plugin process (gracefully first) and its connection.
func (c *Client) Kill() { c.c.Kill() }

// StartError is why Start failed. Permanent reports a failure that starting
// the plugin again cannot mend: its checksum does not match the pin, it
// speaks another protocol version, or it cannot be executed.
type StartError struct {
	Err         error
	permanent   bool
	pinMismatch bool
}

func (e *StartError) Error() string   { return e.Err.Error() }
func (e *StartError) Unwrap() error   { return e.Err }
func (e *StartError) Permanent() bool { return e.permanent }

// PinMismatch reports a binary whose checksum is not the pinned one.
func (e *StartError) PinMismatch() bool { return e.pinMismatch }

// Start starts cmd as a producer plugin (run directly, never through a
// shell; none of the host's environment beyond cmd.Env) over gRPC with
// mutual TLS and returns it once the handshake is done. The caller Kills
// it. Errors are *StartError.
func Start(cmd *exec.Cmd, o StartOptions) (*Client, error) {
	var secure *goplugin.SecureConfig
	if o.Pin != nil {
		secure = &goplugin.SecureConfig{Checksum: o.Pin, Hash: sha256.New()}
	}
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          Set(nil),
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		SecureConfig:     secure,
		StartTimeout:     o.StartTimeout,
		Stderr:           out,
		SyncStderr:       out,
		SyncStdout:       out,
		// go-plugin also logs the plugin's stderr lines through this
		// logger (a panic's stack at error level): they already went to
		// Stderr, so only go-plugin's own messages are kept.
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "go-plugin", Level: hclog.Error, DisableTime: true,
			Output: &skipNamed{out: out, name: "] go-plugin." + filepath.Base(cmd.Path) + ":"},
		}),
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, startError(err)
	}
	raw, err := rpc.Dispense(Name)
	if err != nil {
		client.Kill()
		return nil, &StartError{Err: fmt.Errorf("dispense: %w", err), permanent: true}
	}
	p, ok := raw.(producer.Producer)
	if !ok {
		client.Kill()
		return nil, &StartError{Err: fmt.Errorf("dispensed %T, not a producer", raw), permanent: true}
	}
	return &Client{c: client, p: p}, nil
}

// skipNamed drops the log lines of one sub-logger: hclog writes each
// line in one Write.
type skipNamed struct {
	out  io.Writer
	name string
}

func (w *skipNamed) Write(b []byte) (int, error) {
	if strings.Contains(string(b), w.name) {
		return len(b), nil
	}
	return w.out.Write(b)
}

// startError classifies a failure to start a plugin.
func startError(err error) *StartError {
	msg := err.Error()
	lower := strings.ToLower(msg)
	switch {
	case errors.Is(err, goplugin.ErrChecksumsDoNotMatch):
		return &StartError{Err: errors.New("sha256 checksum does not match the one pinned in the configuration; not started"), permanent: true, pinMismatch: true}
	case strings.Contains(lower, "incompatible api version"):
		return &StartError{Err: fmt.Errorf("speaks another protocol version: %s", oneLine(msg)), permanent: true}
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrPermission), strings.Contains(msg, "exec format error"):
		return &StartError{Err: fmt.Errorf("cannot be executed: %s", oneLine(msg)), permanent: true}
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return &StartError{Err: errors.New("hung at handshake: no answer within producer_start_timeout")}
	case strings.Contains(msg, "exited before we could connect"), strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
		return &StartError{Err: errors.New("exited before the handshake")}
	}
	return &StartError{Err: fmt.Errorf("start: %s", oneLine(msg))}
}

// oneLine puts s on one line.
func oneLine(s string) string {
	s = strings.TrimRight(s, "\r\n")
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
