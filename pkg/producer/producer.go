// Package producer is the SDK for hermesq producer plugins: programs that
// emit automation events (a process finished, a delegated sub-task
// returned, a watched file matched) which hermesq admits to a session's
// queue.
//
// A producer is a small main package that implements Producer and serves
// it with package plugin (github.com/hermesq/hermesq/pkg/producer/plugin,
// the go-plugin gRPC transport, kept apart so that programs that only
// write events, hermesq among them, do not link it). Most producers keep
// their events in an Outbox, which already implements Producer with
// durable claims and leases:
//
//	func main() {
//		ob, err := producer.OpenOutbox(producer.StateDir(), producer.OutboxOptions{Coalesce: true})
//		if err != nil {
//			producer.Logger().Fatal(err)
//		}
//		plugin.Serve(ob)
//	}
//
// hermesq (the host) starts every hermesq-producer-NAME binary of its
// plugin directory over go-plugin's gRPC transport with mutual TLS, and
// loops: Poll → admit every offer → Settle(claim, complete) once the
// admission is durable. A host that dies between the admit and the settle
// leaves the claim unsettled; when its lease runs out the events are offered
// again and resolve to the admissions already made (a duplicate is a
// success), so no event is lost and none runs twice.
//
// A producer that finds its events itself may add them in Poll: Outbox.Add
// inside Poll is allowed, before the Outbox's own Poll (the watch producer
// reads its files, adds an event per matching line, then returns what its
// outbox offers). Other processes may add to the same outbox meanwhile, as
// hermesq's delegate done and proc run do: each waits its turn for the
// outbox's lock. What the host does when Poll returns an error, and the
// deadlines it sets on Poll and Settle, are in Producer's documentation.
//
// Package producertest checks a Producer over gRPC as the host drives it,
// and a plugin's binary started as the host starts it, with its
// configuration in HERMESQ_PRODUCER_CONFIG (producertest.RunBinary).
//
// Plugins log to stderr (Logger); stdout carries go-plugin's handshake.
// The host prefixes each line with the plugin's name.
package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"
)

// Producer is what a plugin implements. Both methods may be called
// concurrently with each other (the host polls one plugin from one
// goroutine, but a settle of an earlier poll may overlap a new poll).
type Producer interface {
	// Poll claims up to max ready events (parts, counted one per identity)
	// and returns them as offers, each with its own claim token. It
	// returns no offer, not an error, when nothing is ready.
	Poll(ctx context.Context, max int) ([]Offer, error)
	// Settle ends the claim of one offer with an action. reason says why
	// (for drop and release); it may be empty.
	Settle(ctx context.Context, claim string, action Action, reason string) error
}

// Offer is one group of events of one session, offered for admission.
//
// Either Parts is set (one part per event: its identity and its own text
// or payload; the new admission is made of the parts not yet admitted), or
// Identities with one Text or Payload for the whole group.
type Offer struct {
	Session    string          // the session whose queue the events go to
	Target     string          // the transcript the work started from; "": the session's current
	Identities []string        // without Parts: the events' identities
	Text       string          // without Parts: the group's text
	Payload    json.RawMessage // without Parts: a JSON object with a "text" member (instead of Text)
	Parts      []Part          // one per event
	Claim      string          // names this offer in Settle
}

// Part is one event of an offer: its identity and its own text or payload.
type Part struct {
	Identity string
	Text     string
	Payload  json.RawMessage
}

// IdentityList returns the offer's identities: those of its parts in
// order, or Identities.
func (o Offer) IdentityList() []string {
	if len(o.Parts) == 0 {
		return o.Identities
	}
	ids := make([]string, len(o.Parts))
	for i, p := range o.Parts {
		ids[i] = p.Identity
	}
	return ids
}

// Action ends a claim.
type Action int

const (
	// Complete: the events are admitted (or were already: a duplicate);
	// they are delivered and never offered again.
	Complete Action = iota + 1
	// Release: the attempt failed; the events are offered again, and
	// dropped once they have used up their attempts.
	Release
	// Defer: not now (the store is unavailable); the events are offered
	// again and the attempt is refunded.
	Defer
	// Drop: the events can never be admitted (invalid); they are dropped
	// with the reason.
	Drop
)

var actionNames = map[Action]string{Complete: "complete", Release: "release", Defer: "defer", Drop: "drop"}

func (a Action) String() string {
	if s, ok := actionNames[a]; ok {
		return s
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// ErrUnknownClaim is returned by Settle for a claim the producer does not
// hold: never issued, already settled, or taken over by a later poll after
// its lease ran out.
var ErrUnknownClaim = errors.New("unknown or expired claim")

// Environment the host gives a plugin (and nothing of its own environment
// beyond PATH, HOME, LANG, LC_ALL, TZ and TMPDIR: no store URL, no
// credentials).
const (
	EnvName     = "HERMESQ_PRODUCER_NAME"  // the plugin's name: NAME of hermesq-producer-NAME
	EnvStateDir = "HERMESQ_PRODUCER_STATE" // the plugin's own state folder (created 0700)
	EnvLease    = "HERMESQ_PRODUCER_LEASE" // the claim lease as a Go duration, e.g. 5m0s
	// EnvConfig is the plugin's own settings, hermesq's config key
	// producers.NAME.config, as a JSON object (unset when there are none).
	// Keys arrive in lower case, as hermesq's config reader folds them.
	EnvConfig = "HERMESQ_PRODUCER_CONFIG"
)

// DefaultLease is how long a claim stays taken when nobody settles it.
const DefaultLease = 5 * time.Minute

// StateDir is the plugin's state folder as the host gives it
// ($HERMESQ_PRODUCER_STATE). Run outside a host it is "", and OpenOutbox
// refuses it.
func StateDir() string { return os.Getenv(EnvStateDir) }

// LeaseFromEnv is the claim lease the host configured ($HERMESQ_PRODUCER_LEASE),
// or DefaultLease.
func LeaseFromEnv() (time.Duration, error) {
	s := os.Getenv(EnvLease)
	if s == "" {
		return DefaultLease, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("producer: %s=%q: want a positive duration such as 5m", EnvLease, s)
	}
	return d, nil
}

// stderr is the plugin's own stderr, kept before go-plugin redirects
// os.Stderr into its stdio stream (plugin.Serve).
var stderr io.Writer = os.Stderr

// Logger returns a logger to the plugin's stderr, which the host forwards
// to its own stderr prefixed with the plugin's name.
func Logger() *log.Logger { return log.New(stderr, "", 0) }
