package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/producer"
)

// producerStat is one producer's outbox figures as stats, check and top
// report them.
type producerStat struct {
	Producer string `json:"producer"`
	producer.Counts
	// OldestWaitingAge is how long the oldest event waiting after a
	// refusal has been in the outbox (0: none waits).
	OldestWaitingAge time.Duration `json:"-"`
	OldestWaitingSec float64       `json:"oldest_waiting_age_seconds"`
}

// producerStats reads the outboxes of producer_state_dir (every producer
// that ever recorded an event, its plugin installed or not), by name.
func (f *Factory) producerStats(ctx context.Context) ([]producerStat, error) {
	pc, err := f.producerConfig()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(pc.StateDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("producer state folder %s: %w", pc.StateDir, err)
	}
	now := time.Now()
	if f.Now != nil {
		now = f.Now()
	}
	var out []producerStat
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !producerName.MatchString(name) {
			continue
		}
		if _, err := os.Stat(filepath.Join(pc.pluginStateDir(name), producer.OutboxFile)); err != nil {
			continue
		}
		ob, err := f.outbox(name)
		if err != nil {
			return nil, err
		}
		c, err := ob.Count(ctx)
		if err != nil {
			return nil, fmt.Errorf("producer %s: %w", name, outboxError(err))
		}
		s := producerStat{Producer: name, Counts: c}
		if c.Waiting > 0 {
			s.OldestWaitingAge = max(now.Sub(c.OldestWaiting), 0)
			s.OldestWaitingSec = s.OldestWaitingAge.Seconds()
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Producer < out[j].Producer })
	return out, nil
}

// producerStatsOrWarn is producerStats for the reports whose main figures
// are the queues': a producer that cannot be read is said on stderr and
// left out.
func (f *Factory) producerStatsOrWarn(ctx context.Context) []producerStat {
	ps, err := f.producerStats(ctx)
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "hermesq: producers left out: %s\n", termtext.OneLine(err.Error()))
		return nil
	}
	return ps
}

// producerTable writes the producers' figures as a table.
func producerTable(w io.Writer, ps []producerStat) error {
	rows := make([][]string, 0, len(ps))
	for _, s := range ps {
		rows = append(rows, []string{s.Producer, strconv.Itoa(s.Pending), strconv.Itoa(s.Waiting),
			termtext.Age(s.OldestWaitingAge, s.Waiting > 0), strconv.Itoa(s.Rejected), strconv.Itoa(s.Delivered), strconv.Itoa(s.Dropped),
			termtext.Cell(termtext.OrDash(s.LastReason), 60)})
	}
	return termtext.Table(w, []string{"PRODUCER", "PENDING", "WAITING", "OLDEST WAITING", "REJECTED", "DELIVERED", "DROPPED", "LAST REFUSAL"}, rows)
}

// producerGauges are the producers' Prometheus gauges.
func producerGauges(ps []producerStat) []*promGauges {
	pending := &promGauges{name: "hermesq_producer_pending", help: "Events pending in a producer's outbox (not yet admitted)."}
	waiting := &promGauges{name: "hermesq_producer_waiting", help: "Pending events the store refused, waiting for their next offer."}
	oldest := &promGauges{name: "hermesq_producer_waiting_oldest_age_seconds", help: "Age in seconds of the oldest event waiting after a refusal (0: none)."}
	rejected := &promGauges{name: "hermesq_producer_rejected", help: "Events rejected as invalid, kept until an operator drops them."}
	for _, s := range ps {
		pending.add(float64(s.Pending), "producer", s.Producer)
		waiting.add(float64(s.Waiting), "producer", s.Producer)
		oldest.add(s.OldestWaitingAge.Seconds(), "producer", s.Producer)
		rejected.add(float64(s.Rejected), "producer", s.Producer)
	}
	return []*promGauges{pending, waiting, oldest, rejected}
}
