package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesq/hermesq/internal/producerhost"
	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/stats"
)

// producerStats reads the outboxes of producer_state_dir (every producer
// that ever recorded an event, its plugin installed or not), by name.
func (f *Factory) producerStats(ctx context.Context) ([]stats.Producer, error) {
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
	var out []stats.Producer
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !producerhost.ValidName(name) {
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
		out = append(out, stats.NewProducer(name, c, now))
	}
	stats.SortProducers(out)
	return out, nil
}

// producerStatsOrWarn is producerStats for the reports whose main figures
// are the queues': a producer that cannot be read is said on stderr and
// left out.
func (f *Factory) producerStatsOrWarn(ctx context.Context) []stats.Producer {
	ps, err := f.producerStats(ctx)
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "hermesq: producers left out: %s\n", termtext.OneLine(err.Error()))
		return nil
	}
	return ps
}
