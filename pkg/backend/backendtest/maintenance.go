package backendtest

import (
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// testMaintenance runs the cases of backend.Maintenance: export
// (maintenance_export.go), import (maintenance_import.go), the round trip
// of a random history (maintenance_roundtrip.go), compaction
// (maintenance_compact.go), size and reclaim (maintenance_size.go).
func testMaintenance(t *testing.T, newStore func(t *testing.T) backend.Store) {
	runCases(t, newStore, maintenanceExportTests, maintenanceImportTests, maintenanceRoundTripTests,
		maintenanceCompactTests, maintenanceSizeTests)
}
