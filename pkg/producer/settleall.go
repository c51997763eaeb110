package producer

import (
	"context"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// ClaimSettlement is how one claim is to be ended.
type ClaimSettlement struct {
	Claim string
	Settlement
}

// BatchSettler is a Producer that ends many claims in one call: the host
// settles a poll's offers with one SettleBatch instead of a Settle each.
// The gRPC transport (package plugin) is one, passing a batch to the
// plugin in one call. An Outbox served as it is settles a batch in one
// transaction without it (SettleAll); a producer that embeds an Outbox is
// settled with its own Settle, which it may have overridden.
type BatchSettler interface {
	// SettleBatch ends each claim as Settle would and returns one error
	// per claim, in order (nil: settled). A failure of one does not
	// undo the others.
	SettleBatch(ctx context.Context, settles []ClaimSettlement) []error
}

// SettleAll ends each claim of settles with p: in one call when p is an
// *Outbox (Outbox.SettleAll) or a BatchSettler, else with a Settle each
// (SettleEach).
func SettleAll(ctx context.Context, p Producer, settles []ClaimSettlement) []error {
	switch p := p.(type) {
	case *Outbox:
		return p.SettleAll(ctx, settles)
	case BatchSettler:
		return p.SettleBatch(ctx, settles)
	}
	return SettleEach(ctx, p, settles)
}

// settleWorkers bounds SettleEach's calls in flight.
const settleWorkers = 64

// SettleEach ends each claim of settles with its own p.Settle, at most 64
// at once, and returns each one's error.
func SettleEach(ctx context.Context, p Producer, settles []ClaimSettlement) []error {
	errs := make([]error, len(settles))
	var wg sync.WaitGroup
	sem := make(chan struct{}, settleWorkers)
	for i, s := range settles {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = p.Settle(ctx, s.Claim, s.Settlement)
		}()
	}
	wg.Wait()
	return errs
}

// SettleAll ends each claim as Settle does, all in one transaction (with
// any other settles arriving meanwhile): one commit for a poll's offers.
func (o *Outbox) SettleAll(ctx context.Context, settles []ClaimSettlement) []error {
	now := o.now()
	errs := make([]error, len(settles))
	var fns []func(*bolt.Tx) error
	var at []int // settles[at[k]] runs fns[k]
	for i, s := range settles {
		if _, ok := actionNames[s.Action]; !ok {
			errs[i] = fmt.Errorf("outbox: settle: unknown action %d", int(s.Action))
			continue
		}
		fns = append(fns, func(tx *bolt.Tx) error { return o.settle(tx, s.Claim, s.Settlement, now) })
		at = append(at, i)
	}
	for k, err := range o.grouped(ctx, fns) {
		if err != nil {
			s := settles[at[k]]
			errs[at[k]] = fmt.Errorf("outbox: settle %s %s: %w", s.Action, s.Claim, err)
		}
	}
	return errs
}
