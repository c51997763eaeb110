package bbolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hermesq/hermesq/pkg/admission/admissiontest"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

func newStore(tb testing.TB) backend.Store {
	tb.Helper()
	s, err := boltstore.Open(context.Background(), filepath.Join(tb.TempDir(), "hermesq.db"), backend.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	backendtest.RunConformanceTests(t, func(t *testing.T) backend.Store { return newStore(t) })
}

func BenchmarkStore(b *testing.B) {
	backendtest.RunBenchmarks(b, func(b *testing.B) backend.Store { return newStore(b) })
}

// A store already holding a loop in a lineage (planted past every check).
func TestDamagedLineage(t *testing.T) {
	admissiontest.RunDamagedLineage(t, func(t *testing.T) backend.Store { return newStore(t) }, boltstore.SetLineageForTest)
}
