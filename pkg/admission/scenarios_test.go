package admission_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hermesq/hermesq/pkg/admission/admissiontest"
	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

// newBolt opens a fresh bbolt store in the test's temp dir.
func newBolt(t *testing.T) backend.Store {
	t.Helper()
	st, err := boltstore.Open(context.Background(), filepath.Join(t.TempDir(), "h.db"), backend.Options{})
	if err != nil {
		t.Fatalf("open bbolt store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestScenariosBolt runs the contract's scenarios on the bbolt store.
func TestScenariosBolt(t *testing.T) {
	admissiontest.RunScenarios(t, newBolt)
}
