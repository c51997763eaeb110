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
// admission is durable, Settle(claim, retry) with a not-before time when
// the store refused it for a reason that may pass, Settle(claim, reject)
// when it is invalid; a poll's offers are settled in one call when the
// producer is an Outbox or a BatchSettler (see SettleAll). A host that
// dies between the admit and the settle leaves the claim unsettled; when
// its lease runs out the events are offered again and resolve to the
// admissions already made (a duplicate is a success), so no event is lost
// and none runs twice.
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
//
// The host bounds every call: a Poll or Settle that has not returned
// within its deadline (producer_poll_deadline, producer_settle_deadline;
// 30 s each by default) gets the plugin killed and started again with
// backoff, as a crash does; its claims stay taken until their lease runs
// out, then their events are offered again.
//
// An error returned by Poll is logged by the host on one line and the
// plugin is polled again with backoff (1 s doubling to 30 s), without a
// restart; with producers run --once, a plugin whose polls failed three
// times in a row is reported failed (exit 8). An error wrapped with
// Permanent says that no retry can mend it (bad configuration): the host
// shows its message, does not start the plugin again, and producers run
// exits 8.
type Producer interface {
	// Poll claims up to req.Max ready events (parts, counted one per
	// identity) and returns them as offers, each with its own claim
	// token. It returns no offer, not an error, when nothing is ready.
	// An event told to wait (Settlement.NotBefore) is not ready before
	// that time.
	Poll(ctx context.Context, req PollRequest) ([]Offer, error)
	// Settle ends the claim of one offer.
	Settle(ctx context.Context, claim string, s Settlement) error
}

// PollRequest is what the host asks of a poll.
type PollRequest struct {
	// Max is how many events (parts, one per identity) the host takes at
	// most.
	Max int
	// PayloadLimit is the store's payload limit in bytes: an offer with
	// parts should compose a payload no larger (see Coalesce). 0: unknown.
	PayloadLimit int
}

// Settlement is how the host ends a claim.
type Settlement struct {
	Action Action
	// Reason says why the events are retried or rejected.
	Reason string
	// NotBefore (Retry): the events are not offered again before this.
	NotBefore time.Time
	// Delivered names identities of the offer that are admitted even
	// though the offer as a whole is retried or rejected (a group split
	// to fit the payload limit, of which some smaller groups went in):
	// they are delivered.
	Delivered []string
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
	// Attempts is how many times the offer's events have been offered,
	// this time included (the most among them); 0: not counted. The host
	// spaces retries by it.
	Attempts int
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
	// Retry: the store refused the events for a reason that may pass (the
	// session is not open yet, a grant is missing, the store is
	// unavailable); they stay pending with the reason and are offered
	// again from Settlement.NotBefore. An event is never dropped for
	// being retried.
	Retry
	// Reject: the events can never be admitted as they are (invalid); they
	// are kept as rejected with the reason, never offered again, until an
	// operator drops them.
	Reject
)

var actionNames = map[Action]string{Complete: "complete", Retry: "retry", Reject: "reject"}

func (a Action) String() string {
	if s, ok := actionNames[a]; ok {
		return s
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// ErrPermanent marks a plugin failure no restart can mend (see Permanent).
var ErrPermanent = errors.New("permanent failure")

// Permanent wraps err as a failure no retry or restart can mend, such as
// a bad configuration: returned by Poll (or served by plugin.Fail), the
// host shows err's message, does not start the plugin again, and
// producers run exits 8.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

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
	// EnvMaxAge is the operator's age limit of pending events as a Go
	// duration (producer_max_age; unset: none): an older pending event is
	// dropped by the outbox, the only way besides producers outbox drop.
	EnvMaxAge = "HERMESQ_PRODUCER_MAX_AGE"
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

// MaxAgeFromEnv is the age limit of pending events the host configured
// ($HERMESQ_PRODUCER_MAX_AGE), or 0: none.
func MaxAgeFromEnv() (time.Duration, error) {
	s := os.Getenv(EnvMaxAge)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("producer: %s=%q: want a positive duration such as 720h", EnvMaxAge, s)
	}
	return d, nil
}

// stderr is the plugin's own stderr, kept before go-plugin redirects
// os.Stderr into its stdio stream (plugin.Serve).
var stderr io.Writer = os.Stderr

// Logger returns a logger to the plugin's stderr, which the host forwards
// to its own stderr prefixed with the plugin's name.
func Logger() *log.Logger { return log.New(stderr, "", 0) }
