package admissiontest

import (
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// scenario is one named scenario, run on a fresh harness.
type scenario struct {
	name string
	fn   func(t *testing.T, h *harness)
}

// RunScenarios runs the contract's scenarios through an admission.Service
// on stores made by newStore, which must return a fresh, empty store for
// each call (closed by the caller's t.Cleanup).
func RunScenarios(t *testing.T, newStore func(t *testing.T) backend.Store) {
	scenarios := []scenario{
		{"BusyFIFO", busyFIFO},
		{"LaterInputSeesNote", laterInputSeesNote},
		{"ViewerAttachesAfterAdmission", viewerAttachesAfterAdmission},
		{"WatchNotices", watchNotices},
		{"Regroup", regroup},
		{"RegroupWithParts", regroupWithParts},
		{"RegroupWithPartsViewer", regroupWithPartsViewer},
		{"MessageCounts", messageCounts},
		{"RequestIDIdempotency", requestIDIdempotency},
		{"QueuedWorkSurvivesNewDrainer", queuedWorkSurvivesNewDrainer},
		{"ExecutedTurnStaysATurn", executedTurnStaysATurn},
		{"FencingRace", fencingRace},
		{"UnknownPausesByDefault", unknownPausesByDefault},
		{"UnknownRequeuePolicy", unknownRequeuePolicy},
		{"UnknownInterruptPolicy", unknownInterruptPolicy},
		{"Max", maxBound},
		{"NoHandler", noHandler},
		{"HandlerFails", handlerFails},
		{"HandlerTimeout", handlerTimeout},
		{"GraceLetsTheTurnFinish", graceLetsTheTurnFinish},
		{"GraceExpiredInterrupts", graceExpiredInterrupts},
		{"LeaseRenewed", leaseRenewed},
		{"LeaseHeld", leaseHeld},
		{"Follow", follow},
		{"DrainAll", drainAll},
		{"DrainAllFollow", drainAllFollow},
		{"HumanToClosedSession", humanToClosedSession},
		{"HumanQueuedThenSwitchedToClosed", humanQueuedThenSwitchedToClosed},
		{"LineageAndResolveTarget", lineageAndResolveTarget},
	}
	scenarios = append(scenarios, faultScenarios...)
	scenarios = append(scenarios, backToBackScenarios...)
	scenarios = append(scenarios, dataScenarios...)
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.fn(t, newHarness(t, newStore)) })
	}
	runMoved(t, newStore)
	for _, p := range producers {
		for _, reason := range backend.CloseReasons {
			t.Run("ClosedSessionNote/"+p.name+"/"+reason, func(t *testing.T) {
				closedSessionNote(t, newHarness(t, newStore), p, reason)
			})
			t.Run("CompressedThenClosed/"+p.name+"/"+reason, func(t *testing.T) {
				compressedThenClosed(t, newHarness(t, newStore), p, reason)
			})
		}
		t.Run("Misrouted/"+p.name, func(t *testing.T) { misrouted(t, newHarness(t, newStore), p) })
		t.Run("TransientTargetRead/"+p.name, func(t *testing.T) {
			transientTargetRead(t, newStore, p)
		})
	}
}

// producer is how one producer names and words a completion.
type producer struct {
	name string // producer name on the admission
	id   func(name string) string
	text func(name string) string
}

var producers = []producer{
	{
		name: "process",
		id:   func(n string) string { return ident("completion", n, "1700000000.0") },
		text: func(n string) string { return "[finished] RESULT_" + n },
	},
	{
		name: "delegation",
		id:   func(n string) string { return ident("async_delegation", n, "") },
		text: func(n string) string { return "[delegation] RESULT_" + n },
	},
}

var process = producers[0]
