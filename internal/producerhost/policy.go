package producerhost

import (
	"errors"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// Outcome is what the host does with an offer the store answered.
type Outcome int

const (
	// Deliver: admitted (or a duplicate); the claim is completed.
	Deliver Outcome = iota + 1
	// Reject: invalid as it is; its events are kept as rejected with the
	// reason and never offered again.
	Reject
	// Wait: refused for a reason that may pass (the session is not open
	// yet, a grant is missing, the store is unavailable or failed); its
	// events stay pending with the reason, offered again from NotBefore.
	Wait
	// Split: a group whose composed payload is over the limit; its parts
	// are offered again in smaller groups.
	Split
)

var outcomeNames = map[Outcome]string{Deliver: "deliver", Reject: "reject", Wait: "wait", Split: "split"}

func (o Outcome) String() string { return outcomeNames[o] }

// Refusal is the store's answer to one offer, as the policy sees it.
type Refusal struct {
	Code          backend.Code // "": admitted
	GroupTooLarge bool         // its parts compose a payload over the limit
	Parts         int          // how many parts (events) the offer holds
	Reason        string       // one line
}

// RefusalOf classifies err, the store's answer to an offer of parts
// events (nil: admitted).
func RefusalOf(err error, parts int) Refusal {
	if err == nil {
		return Refusal{Parts: parts}
	}
	var big *admission.GroupTooLargeError
	return Refusal{
		Code:          backend.CodeOf(err),
		GroupTooLarge: errors.As(err, &big),
		Parts:         parts,
		Reason:        oneLine(err.Error()),
	}
}

// Backoff spaces the offers of a refused event: Base after its first
// refusal, doubling with each attempt up to Cap.
type Backoff struct {
	Base, Cap time.Duration
}

// DefaultBackoff is producer_backoff and producer_backoff_cap's default.
var DefaultBackoff = Backoff{Base: time.Second, Cap: 5 * time.Minute}

// Delay is the wait after the attempts-th offer was refused (attempts
// counts from 1).
func (b Backoff) Delay(attempts int) time.Duration {
	d := b.Base
	for i := 1; i < attempts && d < b.Cap; i++ {
		d *= 2
	}
	return min(d, b.Cap)
}

// Decision is the policy's answer.
type Decision struct {
	Outcome   Outcome
	Reason    string
	NotBefore time.Time // Wait
}

// Decide is the refusal-to-action policy, one pure function: what the host
// does with an offer the store answered with r, offered for the attempts-th
// time, at now. Nothing is ever dropped: an invalid offer is rejected
// (kept, counted, never silently); a group over the payload limit is split
// (one event alone over it is rejected: it can never fit); every other
// refusal waits, spaced by b.
func Decide(r Refusal, attempts int, now time.Time, b Backoff) Decision {
	switch {
	case r.Code == "":
		return Decision{Outcome: Deliver}
	case r.GroupTooLarge && r.Parts > 1:
		return Decision{Outcome: Split, Reason: r.Reason}
	case r.Code == backend.CodeInvalid:
		return Decision{Outcome: Reject, Reason: r.Reason}
	}
	// not_found, forbidden, conflict, fenced, unavailable, internal,
	// attention and anything else: it may pass.
	return Decision{Outcome: Wait, Reason: r.Reason, NotBefore: now.Add(b.Delay(max(attempts, 1)))}
}
