package admission

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// DrainAll drains every session with queued work, up to parallel at once, each strictly FIFO under its
// own lease; sessions whose lease is held by another drainer are skipped (reported), not an error.
// Sessions opt.Principal may not drain are left out (counted through opt.LeftOut), not an error.
// With opt.Follow it keeps watching for new work (Store.Subscribe) until ctx ends.
//
// Each session is drained without Follow and without Wait, by as many Drain
// calls as work arrives; opt.Max bounds each call. A skipped session is
// reported through opt.Log. The error joins the sessions' errors (and, with
// Follow, ctx's).
func (s *Service) DrainAll(ctx context.Context, opt DrainOptions, parallel int) ([]DrainReport, error) {
	if parallel <= 0 {
		parallel = 1
	}
	opt, err := opt.normalise()
	if err != nil {
		return nil, err
	}
	one := opt
	one.Follow, one.Wait = false, false

	var events <-chan string
	if opt.Follow {
		subCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		if events, err = s.Store.Subscribe(subCtx); err != nil {
			opt.Log("drain --all: no store events (%v); looking every %s", err, followSafety)
			events = nil
		}
	}

	var (
		mu           sync.Mutex
		reports      []DrainReport
		errs         []error
		active       = map[string]bool{}
		again        = map[string]bool{} // work arrived while the session was being drained
		paused       = map[string]bool{} // left paused on an unknown admission; wait for a resolve
		leftOut      = map[string]bool{} // with work, but opt.Principal may not drain it
		newlyLeftOut int                 // of leftOut, not yet reported through opt.LeftOut
		wg           sync.WaitGroup
		sem          = make(chan struct{}, parallel)
	)
	start := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if active[id] {
			again[id] = true
			return
		}
		active[id] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				active[id] = false
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			for {
				rep, err := s.Drain(ctx, id, one)
				mu.Lock()
				switch {
				case errors.Is(err, backend.ErrForbidden):
					// A grant revoked since the session was listed.
					if !leftOut[id] {
						leftOut[id] = true
						if opt.LeftOut != nil {
							opt.LeftOut(1)
						}
					}
					if rep.count() > 0 {
						reports = append(reports, rep)
					}
				case errors.Is(err, backend.ErrLeaseHeld):
					opt.Log("drain %s: skipped: %v", id, err)
				case ctx.Err() != nil && errors.Is(err, ctx.Err()) && rep.count() == 0:
					// stopped before doing anything: nothing to report
				case opt.Follow && err == nil && rep.count() == 0 && rep.Deferred == 0:
					// woken by a change that left nothing to do: not worth a report
				default:
					reports = append(reports, rep)
					if err != nil && !(ctx.Err() != nil && errors.Is(err, ctx.Err())) {
						errs = append(errs, err)
					}
				}
				paused[id] = errors.Is(err, ErrPaused)
				if again[id] && ctx.Err() == nil && !paused[id] {
					again[id] = false
					mu.Unlock()
					continue
				}
				again[id] = false
				active[id] = false
				mu.Unlock()
				return
			}
		}()
	}
	// hasWork says whether a session is worth a Drain: queued work, or
	// admissions left running or unknown by a drainer that is gone (unless
	// that already paused it under the pause policy).
	hasWork := func(sess backend.Session) bool {
		stuck := sess.Unknown > 0 || (sess.Running > 0 && !sess.LeaseLive(s.now()))
		mu.Lock()
		defer mu.Unlock()
		if sess.Unknown == 0 {
			paused[sess.ID] = false
		}
		if paused[sess.ID] && sess.Unknown > 0 {
			return false
		}
		return sess.Queued > 0 || stuck
	}
	// mayDrain says whether opt.Principal may drain the session; a session
	// with work it may not is counted once as left out.
	mayDrain := func(sess backend.Session) bool {
		if opt.AsOwner || backend.Permits(sess.Owner, sess.Grants, opt.Principal, backend.ActDrain, "") {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		if !leftOut[sess.ID] {
			leftOut[sess.ID] = true
			newlyLeftOut++
		}
		return false
	}
	reportLeftOut := func() {
		mu.Lock()
		n := newlyLeftOut
		newlyLeftOut = 0
		mu.Unlock()
		if n > 0 && opt.LeftOut != nil {
			opt.LeftOut(n)
		}
	}
	scan := func() error {
		all, err := s.Store.ListSessions(ctx, s.now())
		if err != nil {
			return fmt.Errorf("drain --all: list sessions: %w", err)
		}
		for _, sess := range all {
			if hasWork(sess) && mayDrain(sess) {
				start(sess.ID)
			}
		}
		reportLeftOut()
		return nil
	}

	if err := scan(); err != nil && !opt.Follow {
		return nil, err
	} else if err != nil {
		opt.Log("%v", err)
	}
	if opt.Follow {
		t := time.NewTicker(followSafety)
		defer t.Stop()
	follow:
		for {
			select {
			case <-ctx.Done():
				break follow
			case <-t.C:
				if err := scan(); err != nil {
					opt.Log("%v", err)
				}
			case id, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				sess, err := s.Store.GetSession(ctx, id, s.now())
				if err != nil {
					if ctx.Err() == nil {
						opt.Log("drain %s: read session: %v", id, err)
					}
					continue
				}
				if hasWork(sess) && mayDrain(sess) {
					start(id)
				}
				reportLeftOut()
			}
		}
	}
	wg.Wait()
	sortReports(reports)
	if opt.Follow && ctx.Err() != nil {
		errs = append([]error{fmt.Errorf("drain --all: stopped: %w", ctx.Err())}, errs...)
	}
	err = joinErrors(errs...)
	return reports, err
}

// sortReports orders reports by session, keeping each session's in the
// order they ran.
func sortReports(r []DrainReport) {
	sort.SliceStable(r, func(i, j int) bool { return r[i].Session < r[j].Session })
}
