package backendtest

import (
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// testDrain runs the cases of backend.Drain: the lease (drain_lease.go),
// claims (drain_claim.go), settles and requeues (drain_settle.go), runs
// (drain_settle_run.go), a settle joined to the next claim
// (drain_settle_claim.go), who may drain (drain_right.go) and Subscribe
// (drain_subscribe.go).
func testDrain(t *testing.T, newStore func(t *testing.T) backend.Store) {
	runCases(t, newStore, drainLeaseTests, drainClaimTests, drainSettleTests, drainSettleRunTests,
		drainSettleClaimTests, drainRightTests, drainSubscribeTests)
}
