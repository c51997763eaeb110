package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var maintenanceSizeTests = []suiteTest{
	{name: "Reclaim", fn: testReclaim},
}

// Reclaim reports sizes and changes no record.
func testReclaim(t *testing.T, s backend.Store) {
	compactFixture(t, s)
	_, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact", err)
	before := export(t, s)
	res, err := s.Reclaim(ctxOf(t))
	noErr(t, "reclaim", err)
	if res.Before <= 0 || res.After <= 0 {
		t.Errorf("reclaim sizes %+v, want both positive", res)
	}
	diff(t, "export after reclaim", before, export(t, s))
	if size, err := s.Size(ctxOf(t)); err != nil || size <= 0 {
		t.Errorf("size after reclaim: %d, %v", size, err)
	}
	human(t, s, "s1", "after reclaim")
}
