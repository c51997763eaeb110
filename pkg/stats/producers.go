package stats

import (
	"sort"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
)

// Producer is one producer's outbox figures as stats, check and top
// report them.
type Producer struct {
	Producer string `json:"producer"`
	producer.Counts
	// OldestWaitingAge is how long the oldest event waiting after a
	// refusal has been in the outbox (0: none waits).
	OldestWaitingAge time.Duration `json:"-"`
	OldestWaitingSec float64       `json:"oldest_waiting_age_seconds"`
}

// NewProducer is the figures of producer name from its outbox's counts,
// read at now.
func NewProducer(name string, c producer.Counts, now time.Time) Producer {
	s := Producer{Producer: name, Counts: c}
	if c.Waiting > 0 {
		s.OldestWaitingAge = max(now.Sub(c.OldestWaiting), 0)
		s.OldestWaitingSec = s.OldestWaitingAge.Seconds()
	}
	return s
}

// SortProducers orders ps by producer name.
func SortProducers(ps []Producer) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Producer < ps[j].Producer })
}

// AgeText is an age as the figures' text shows it: whole seconds; "-"
// when there is none.
func AgeText(d time.Duration, some bool) string {
	if !some {
		return "-"
	}
	return d.Truncate(time.Second).String()
}
