package redis_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
	redisstore "github.com/hermesq/hermesq/plugins/storage/redis"
)

func open(tb testing.TB, rawURL string, opts backend.Options) (backend.Store, error) {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return redisstore.Opener(ctx, u, opts)
}

func mustOpen(tb testing.TB, rawURL string) backend.Store {
	tb.Helper()
	s, err := open(tb, rawURL, backend.Options{})
	if err != nil {
		tb.Fatalf("open %s: %v", backend.Redact(rawURL), err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.RunConformanceTests(t, func(t *testing.T) backend.Store { return mustOpen(t, srv.FreshURL()) })
}

func TestConformanceCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	backendtest.RunConformanceTests(t, func(t *testing.T) backend.Store { return mustOpen(t, c.FreshURL()) })
}

func BenchmarkStore(b *testing.B) {
	srv := redistest.Start(b)
	backendtest.RunBenchmarks(b, func(b *testing.B) backend.Store { return mustOpen(b, srv.FreshURL()) })
}

func BenchmarkStoreCluster(b *testing.B) {
	c := redistest.StartCluster(b)
	backendtest.RunBenchmarks(b, func(b *testing.B) backend.Store { return mustOpen(b, c.FreshURL()) })
}
