package producer_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/hermesq/hermesq/pkg/producer"
)

// counting embeds an Outbox and overrides its Settle.
type counting struct {
	*producer.Outbox
	n *atomic.Int32
}

func (c counting) Settle(ctx context.Context, claim string, s producer.Settlement) error {
	c.n.Add(1)
	return c.Outbox.Settle(ctx, claim, s)
}

// SettleAll settles an Outbox in one call, and a producer embedding one
// with its own Settle, once a claim: the Outbox's batch does not bypass it.
func TestSettleAllKeepsAnOverriddenSettle(t *testing.T) {
	ob, _ := openOutbox(t, producer.OutboxOptions{})
	for _, id := range []string{"a", "b", "c"} {
		add(t, ob, "s1", id, "t")
	}
	var n atomic.Int32
	p := counting{ob, &n}
	offers := poll(t, ob, 10)
	var settles []producer.ClaimSettlement
	for _, o := range offers {
		settles = append(settles, producer.ClaimSettlement{Claim: o.Claim, Settlement: producer.Settlement{Action: producer.Complete}})
	}
	for i, err := range producer.SettleAll(context.Background(), p, settles[:2]) {
		if err != nil {
			t.Errorf("settle %d: %v", i, err)
		}
	}
	if n.Load() != 2 {
		t.Errorf("the producer's Settle called %d times, want 2", n.Load())
	}
	if errs := producer.SettleAll(context.Background(), ob, settles[2:]); errs[0] != nil {
		t.Errorf("outbox: %v", errs[0])
	}
	for id, e := range entries(t, ob) {
		if e.State != producer.StateDelivered {
			t.Errorf("%s: %s, want delivered", id, e.State)
		}
	}
}
