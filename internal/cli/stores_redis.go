package cli

import "github.com/hermesq/hermesq/pkg/backend"

// registerRedis registers the Redis store ("redis", "rediss").
func registerRedis(r *backend.Registry) {}
