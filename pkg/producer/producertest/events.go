package producertest

import (
	"fmt"

	"github.com/hermesq/hermesq/pkg/producer"
)

// DelegationResults returns n results of delegated sub-tasks as the
// delegation plugin records them, spread in turn over sessions s000,
// s001, … (sessions of them; each its own target), with identities
// ["async_delegation","d00000",""], … : the events the producer benchmarks
// offer.
func DelegationResults(n, sessions int) []producer.Event {
	evs := make([]producer.Event, n)
	for i := range evs {
		s := fmt.Sprintf("s%03d", i%sessions)
		id := fmt.Sprintf("d%05d", i)
		evs[i] = producer.Event{Session: s, Target: s, Identity: producer.Identity("async_delegation", id, ""),
			Text: fmt.Sprintf("[delegation %s] result %d of the benchmark", id, i)}
	}
	return evs
}
