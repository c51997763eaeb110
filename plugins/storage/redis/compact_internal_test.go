package redis

import (
	"context"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// CompactOnceForTest runs one compact script call as Compact's steps do,
// with the scan given (0: the rest of the session), whatever step size
// the store has learnt.
func CompactOnceForTest(ctx context.Context, st backend.Store, sid string, before time.Time, after uint64, scan int) (uint64, []string, error) {
	return st.(*Store).compactOnce(ctx, sid, cutoffNs(before), 0, after, scan)
}
