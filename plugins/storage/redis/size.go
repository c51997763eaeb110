package redis

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Reclaim asks every master to give freed memory back (MEMORY PURGE, where
// the allocator supports it; refused or unknown, it is skipped) and reports
// used_memory summed over the masters before and after. That figure covers
// everything the servers hold, not only this store's keys.
func (s *Store) Reclaim(ctx context.Context) (backend.ReclaimResult, error) {
	var res backend.ReclaimResult
	var err error
	if res.Before, err = s.usedMemory(ctx); err != nil {
		return res, err
	}
	_ = s.eachMaster(ctx, func(ctx context.Context, c goredis.Cmdable) error {
		if d, ok := c.(interface {
			Do(ctx context.Context, args ...any) *goredis.Cmd
		}); ok {
			_ = d.Do(ctx, "MEMORY", "PURGE").Err()
		}
		return nil
	})
	if res.After, err = s.usedMemory(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// Size is used_memory summed over the masters.
func (s *Store) Size(ctx context.Context) (int64, error) { return s.usedMemory(ctx) }

func (s *Store) eachMaster(ctx context.Context, fn func(ctx context.Context, c goredis.Cmdable) error) error {
	if cc, ok := s.client.(*goredis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return fn(ctx, c) })
	}
	return fn(ctx, s.client)
}

func (s *Store) usedMemory(ctx context.Context) (int64, error) {
	var total atomic.Int64
	err := s.eachMaster(ctx, func(ctx context.Context, c goredis.Cmdable) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return errInternalf("INFO memory: used_memory %q", v)
				}
				total.Add(n)
			}
		}
		return nil
	})
	if err != nil {
		return 0, s.wrap("reclaim: read used memory", err)
	}
	return total.Load(), nil
}
