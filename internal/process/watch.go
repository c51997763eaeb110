package process

import (
	"context"
	"sync"
	"time"
)

// Watched is a running process, not started by hermesq, that proc watch
// waits for.
type Watched struct {
	PID       int
	Command   []string
	StartedAt float64 // seconds since the epoch
	startTick string  // the kernel's start time, to tell a reused pid
}

// WaitEach waits for every process at once and calls ended for each as it
// ends, with the time it was seen ended, one call at a time. It returns
// when every process has ended, with the first error of a wait or of
// ended.
func WaitEach(ctx context.Context, procs []Watched, ended func(w Watched, at time.Time) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, w := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := Wait(ctx, w)
			if err == nil {
				at := time.Now()
				mu.Lock()
				err = ended(w, at)
				mu.Unlock()
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}
