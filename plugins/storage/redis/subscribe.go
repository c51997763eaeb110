package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// Subscribe reports the id of every session a script changes, from the
// changes channel. Repeats of a session not yet read are coalesced.
func (s *Store) Subscribe(ctx context.Context) (<-chan string, error) {
	ps := s.client.Subscribe(ctx, s.k.changes())
	// Wait for the subscription to be confirmed, so a change made after
	// Subscribe returns is never missed.
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	_, err := ps.Receive(rctx)
	cancel()
	if err != nil {
		_ = ps.Close()
		return nil, s.wrap("subscribe", err)
	}
	msgs := ps.Channel(goredis.WithChannelSize(256))
	out := make(chan string, 64)
	go func() {
		defer close(out)
		defer ps.Close()
		var queue []string
		pending := map[string]bool{}
		for {
			var send chan string
			var next string
			if len(queue) > 0 {
				send, next = out, queue[0]
			}
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				if !pending[m.Payload] {
					pending[m.Payload] = true
					queue = append(queue, m.Payload)
				}
			case send <- next:
				queue = queue[1:]
				delete(pending, next)
			}
		}
	}()
	return out, nil
}
