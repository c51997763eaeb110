package producer

import (
	"context"
	"sync/atomic"
	"time"
)

// Served adds up the time a producer behind a transport spent serving
// calls on its own side (for an Outbox: its bbolt file), the transport
// excluded. The host puts one in a call's context (WithServed); the
// transport (package plugin) adds what the plugin reports. Safe for
// concurrent use.
type Served struct{ n atomic.Int64 }

// Add adds d.
func (s *Served) Add(d time.Duration) { s.n.Add(int64(d)) }

// Total is the time added so far.
func (s *Served) Total() time.Duration { return time.Duration(s.n.Load()) }

type servedKey struct{}

// WithServed returns ctx carrying s: a transport adds to s the time the
// producer reports for a call made with the context.
func WithServed(ctx context.Context, s *Served) context.Context {
	return context.WithValue(ctx, servedKey{}, s)
}

// ServedFrom returns the Served that ctx carries, or nil.
func ServedFrom(ctx context.Context) *Served {
	s, _ := ctx.Value(servedKey{}).(*Served)
	return s
}
