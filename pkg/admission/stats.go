package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// QueueStats are the figures of one session's queue, or of every session
// together (Stats.Total).
type QueueStats struct {
	Session string `json:"session,omitempty"`
	// Depth is the number of queued admissions.
	Depth int `json:"depth"`
	// OldestQueuedAge is how long the oldest queued admission has waited
	// (the FIFO head's admitted_at to now); 0 when none is queued.
	OldestQueuedAge time.Duration `json:"-"`
	OldestQueuedSec float64       `json:"oldest_queued_age_seconds"`
	Running         int           `json:"running"`
	Unknown         int           `json:"unknown"`
	// RunningAge is how long the running admission has run; 0 when none.
	RunningAge  time.Duration `json:"-"`
	RunningID   string        `json:"running_admission,omitempty"`
	LeaseHolder string        `json:"lease_holder,omitempty"`
	Viewers     int           `json:"viewers"`
	State       string        `json:"state,omitempty"`
	// Outcomes counts done admissions by outcome, Modes executed ones by
	// mode; every outcome and mode is present, zero included.
	Outcomes map[backend.Outcome]int `json:"outcomes"`
	Modes    map[backend.Mode]int    `json:"modes"`
}

// Stats is a snapshot of every queue.
type Stats struct {
	At       time.Time    `json:"at"`
	Sessions []QueueStats `json:"sessions"`
	Total    QueueStats   `json:"total"`
}

// Outcomes and modes in the order reports list them.
var (
	AllOutcomes = []backend.Outcome{backend.OutcomeCompleted, backend.OutcomeFailed, backend.OutcomeInterrupted, backend.OutcomeCancelled}
	AllModes    = []backend.Mode{backend.ModeTurn, backend.ModeNote}
)

func newQueueStats(session string) QueueStats {
	q := QueueStats{Session: session, Outcomes: map[backend.Outcome]int{}, Modes: map[backend.Mode]int{}}
	for _, o := range AllOutcomes {
		q.Outcomes[o] = 0
	}
	for _, m := range AllModes {
		q.Modes[m] = 0
	}
	return q
}

// Stats reads every session and its admissions and sums them up. It only
// reads: each session is one consistent read, the whole is not one
// snapshot across sessions.
func (s *Service) Stats(ctx context.Context) (Stats, error) {
	now := s.now()
	st := Stats{At: now.UTC(), Sessions: []QueueStats{}, Total: newQueueStats("")}
	sessions, err := s.Store.ListSessions(ctx, s.now())
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	for _, sess := range sessions {
		as, err := s.Store.ListAdmissions(ctx, sess.ID, backend.AdmissionFilter{})
		if err != nil {
			return st, fmt.Errorf("stats: session %s: %w", sess.ID, err)
		}
		q := newQueueStats(sess.ID)
		q.Viewers, q.State = sess.Viewers, sess.State()
		if sess.LeaseLive(now) {
			q.LeaseHolder = sess.LeaseHolder
		}
		for _, a := range as {
			switch a.Status {
			case backend.StatusQueued:
				q.Depth++
				if age := now.Sub(a.AdmittedAt); q.Depth == 1 || age > q.OldestQueuedAge {
					q.OldestQueuedAge = max(age, 0)
				}
			case backend.StatusRunning:
				q.Running++
				q.RunningID, q.RunningAge = a.ID, max(now.Sub(a.StartedAt), 0)
			case backend.StatusUnknown:
				q.Unknown++
			case backend.StatusDone:
				q.Outcomes[a.Outcome]++
			}
			if a.Mode != "" && a.Status == backend.StatusDone {
				q.Modes[a.Mode]++
			}
		}
		q.OldestQueuedSec = q.OldestQueuedAge.Seconds()
		st.Sessions = append(st.Sessions, q)
		t := &st.Total
		t.Depth += q.Depth
		t.Running += q.Running
		t.Unknown += q.Unknown
		t.Viewers += q.Viewers
		t.OldestQueuedAge = max(t.OldestQueuedAge, q.OldestQueuedAge)
		for k, v := range q.Outcomes {
			t.Outcomes[k] += v
		}
		for k, v := range q.Modes {
			t.Modes[k] += v
		}
	}
	st.Total.OldestQueuedSec = st.Total.OldestQueuedAge.Seconds()
	return st, nil
}
