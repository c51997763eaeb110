package producerhost

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
)

// settleWorkers bounds the settles of one poll in flight at once.
const settleWorkers = 64

// settle settles each offer of a poll with its settlement, the settles
// running at once (an outbox commits settles arriving together in one
// transaction). It returns the settles' time, as the wall time they took
// together split between the calls (rpc) and what the plugin reports it
// spent serving them (outbox) in proportion to their sums, and the error
// that ends the round: a missed deadline, or a failure other than an
// unknown claim. Such an error stops the settles not yet made, and a
// missed deadline cancels those in flight too (the plugin is killed): their
// claims stay taken until their lease runs out, as before.
func (h *Host) settle(ctx context.Context, name string, p producer.Producer, offers []producer.Offer, ss []producer.Settlement) (rpc, outbox time.Duration, _ error) {
	served := &producer.Served{}
	ctx, stop := context.WithCancel(producer.WithServed(ctx, served))
	defer stop()
	type outcome struct {
		err           error
		missed, fatal bool
		took          time.Duration
	}
	outs := make([]outcome, len(offers))
	var stopped atomic.Bool // a fatal outcome: make no more settles
	began := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, settleWorkers)
	for i, o := range offers {
		sem <- struct{}{}
		if stopped.Load() {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			sctx, cancel := context.WithTimeout(ctx, h.Config.SettleDeadline)
			defer cancel()
			t0 := time.Now()
			err := p.Settle(sctx, o.Claim, ss[i])
			out := outcome{err: err, took: time.Since(t0)}
			switch {
			case err == nil:
			case pastDeadline(sctx):
				out.missed, out.fatal = true, true
				stop()
			case ctx.Err() != nil: // stopped by another's missed deadline
				out.err = nil
			case !errors.Is(err, producer.ErrUnknownClaim):
				out.fatal = true
			}
			if out.fatal {
				stopped.Store(true)
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	wall := time.Since(began)

	var sum time.Duration
	var end error
	for i, out := range outs {
		sum += out.took
		if out.err == nil {
			continue
		}
		if out.missed {
			end = &deadlineError{call: "settle", key: "producer_settle_deadline", d: h.Config.SettleDeadline}
			continue
		}
		// The claim stays taken until its lease runs out; then the
		// events are offered again and resolve to their admissions.
		h.log.printf(name, "settle %s of %s failed: %s", ss[i].Action, describeOffer(offers[i]), oneLine(out.err.Error()))
		if out.fatal && end == nil {
			end = out.err
		}
	}
	if sum > 0 {
		outbox = time.Duration(float64(wall) * min(float64(served.Total())/float64(sum), 1))
	}
	return wall, outbox, end
}
