package producerhost

import (
	"context"
	"errors"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
)

// settle ends the claims of a poll's offers, each with its settlement, in
// one call (producer.SettleAll: one SettleBatch to a plugin, one outbox
// transaction; a plugin built before it gets a Settle each, at once). The
// call has the settle deadline. It returns the call's time, the part of it
// the plugin reports it spent serving it (at most the call's time), and
// the error that ends the round: a missed deadline, or a failure other
// than an unknown claim. A claim not settled stays taken until its lease
// runs out; then its events are offered again and resolve to their
// admissions.
func (h *Host) settle(ctx context.Context, name string, p producer.Producer, offers []producer.Offer, ss []producer.Settlement) (rpc, outbox time.Duration, _ error) {
	settles := make([]producer.ClaimSettlement, len(offers))
	for i, o := range offers {
		settles[i] = producer.ClaimSettlement{Claim: o.Claim, Settlement: ss[i]}
	}
	served := &producer.Served{}
	sctx, cancel := context.WithTimeout(producer.WithServed(ctx, served), h.Config.SettleDeadline)
	defer cancel()
	t0 := time.Now()
	errs := producer.SettleAll(sctx, p, settles)
	rpc = time.Since(t0)
	outbox = min(served.Total(), rpc)
	var end error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if pastDeadline(sctx) {
			return rpc, outbox, &deadlineError{call: "settle", key: "producer_settle_deadline", d: h.Config.SettleDeadline}
		}
		h.log.printf(name, "settle %s of %s failed: %s", ss[i].Action, describeOffer(offers[i]), oneLine(err.Error()))
		if end == nil && !errors.Is(err, producer.ErrUnknownClaim) {
			end = err
		}
	}
	return rpc, outbox, end
}
