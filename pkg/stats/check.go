package stats

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// State is a check's outcome, as a Nagios plugin state: its value is the
// plugin's exit code.
type State int

// The Nagios plugin states.
const (
	OK State = iota
	Warning
	Critical
	Unknown
)

var stateNames = [...]string{"OK", "WARNING", "CRITICAL", "UNKNOWN"}

func (s State) String() string { return stateNames[s] }

// Thresholds are what a check compares the figures with; a threshold of 0
// is not checked.
type Thresholds struct {
	DepthWarn, DepthCrit int
	AgeWarn, AgeCrit     time.Duration
	// WaitCrit: CRITICAL when a producer event waited after a refusal
	// longer than this.
	WaitCrit time.Duration
}

// CheckResult is a check's state and its status line,
// "HERMESQ STATE - summary | perfdata", without a newline.
type CheckResult struct {
	State State
	Line  string
}

// Scope is the part of s a check looks at: every session and their total,
// or with session set, that session alone (ErrNotFound when s has none of
// that name).
func Scope(s admission.Stats, session string) ([]admission.QueueStats, admission.QueueStats, error) {
	if session == "" {
		return s.Sessions, s.Total, nil
	}
	var scope []admission.QueueStats
	var total admission.QueueStats
	for _, q := range s.Sessions {
		if q.Session == session {
			scope = append(scope, q)
			total = q
		}
	}
	if scope == nil {
		return nil, admission.QueueStats{}, backend.Errorf(backend.ErrNotFound, "check: session %s not found", session)
	}
	return scope, total, nil
}

// Check decides how the sessions of scope (their total: total) and the
// producers ps stand against th. CRITICAL when a session has an unknown
// admission, a depth or an oldest queued age at the critical threshold,
// or a producer event has waited after a refusal for longer than
// th.WaitCrit; WARNING at the warning thresholds, or when a producer holds
// rejected events; OK otherwise. Producer events waiting for less are
// named in the summary.
func Check(scope []admission.QueueStats, total admission.QueueStats, ps []Producer, th Thresholds) CheckResult {
	state := OK
	var reasons []string
	raise := func(to State, why string) {
		state = max(state, to)
		reasons = append(reasons, why)
	}
	for _, q := range scope {
		switch {
		case q.Unknown > 0:
			raise(Critical, fmt.Sprintf("%s has %d unknown (paused)", q.Session, q.Unknown))
		}
		switch {
		case th.DepthCrit > 0 && q.Depth >= th.DepthCrit:
			raise(Critical, fmt.Sprintf("%s depth %d >= %d", q.Session, q.Depth, th.DepthCrit))
		case th.DepthWarn > 0 && q.Depth >= th.DepthWarn:
			raise(Warning, fmt.Sprintf("%s depth %d >= %d", q.Session, q.Depth, th.DepthWarn))
		}
		if q.Depth > 0 {
			switch {
			case th.AgeCrit > 0 && q.OldestQueuedAge >= th.AgeCrit:
				raise(Critical, fmt.Sprintf("%s oldest queued %s >= %s", q.Session, AgeText(q.OldestQueuedAge, true), th.AgeCrit))
			case th.AgeWarn > 0 && q.OldestQueuedAge >= th.AgeWarn:
				raise(Warning, fmt.Sprintf("%s oldest queued %s >= %s", q.Session, AgeText(q.OldestQueuedAge, true), th.AgeWarn))
			}
		}
	}
	waitCrit := th.WaitCrit
	var waiting, rejected int
	var waitAge time.Duration
	for _, p := range ps {
		waiting += p.Waiting
		rejected += p.Rejected
		waitAge = max(waitAge, p.OldestWaitingAge)
		switch {
		case p.Waiting > 0 && waitCrit > 0 && p.OldestWaitingAge > waitCrit:
			raise(Critical, fmt.Sprintf("producer %s: %d waiting after a refusal, oldest %s > %s: %s",
				p.Producer, p.Waiting, AgeText(p.OldestWaitingAge, true), waitCrit, PerfText(p.LastReason)))
		case p.Waiting > 0:
			reasons = append(reasons, fmt.Sprintf("producer %s: %d waiting after a refusal, oldest %s",
				p.Producer, p.Waiting, AgeText(p.OldestWaitingAge, true)))
		}
		if p.Rejected > 0 {
			raise(Warning, fmt.Sprintf("producer %s: %d rejected (producers outbox %s)", p.Producer, p.Rejected, p.Producer))
		}
	}
	summary := fmt.Sprintf("%d sessions, depth %d, oldest %s, running %d, unknown %d",
		len(scope), total.Depth, AgeText(total.OldestQueuedAge, total.Depth > 0), total.Running, total.Unknown)
	if len(reasons) > 0 {
		summary = strings.Join(reasons, "; ") + " (" + summary + ")"
	}
	thr := func(v int) string {
		if v == 0 {
			return ""
		}
		return strconv.Itoa(v)
	}
	thrD := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	}
	perf := fmt.Sprintf("depth=%d;%s;%s;0 oldest_age=%ss;%s;%s;0 running=%d;;;0 unknown=%d;;1;0 producer_waiting=%d;;;0 producer_waiting_age=%ss;;%s;0 producer_rejected=%d;1;;0",
		total.Depth, thr(th.DepthWarn), thr(th.DepthCrit),
		strconv.FormatFloat(total.OldestQueuedAge.Seconds(), 'f', 3, 64), thrD(th.AgeWarn), thrD(th.AgeCrit),
		total.Running, total.Unknown, waiting, strconv.FormatFloat(waitAge.Seconds(), 'f', 3, 64), thrD(waitCrit), rejected)
	return CheckResult{State: state, Line: fmt.Sprintf("HERMESQ %s - %s | %s", state, summary, perf)}
}

// UnknownLine is the status line of a check that could not be made.
func UnknownLine(err error) string {
	return "HERMESQ UNKNOWN - " + PerfText(err.Error())
}

// PerfText keeps a message on one line and from being read as perfdata: a
// "|" would start it early.
func PerfText(s string) string {
	s = strings.TrimRight(s, "\r\n")
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	return strings.ReplaceAll(s, "|", "/")
}
