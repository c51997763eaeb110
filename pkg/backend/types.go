package backend

import (
	"encoding/json"
	"time"
)

// Kind says who an admission came from.
type Kind string

const (
	KindHuman      Kind = "human"
	KindAutomation Kind = "automation"
)

// Status is where an admission is in its life (docs/contract.md §2).
type Status string

const (
	StatusQueued  Status = "queued"
	StatusRunning Status = "running"
	StatusUnknown Status = "unknown"
	StatusDone    Status = "done"
)

// Outcome is how a done admission ended; empty until status is done.
type Outcome string

const (
	OutcomeCompleted   Outcome = "completed"
	OutcomeFailed      Outcome = "failed"
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeCancelled   Outcome = "cancelled"
)

// Mode says how an admission was executed; empty until it runs.
type Mode string

const (
	ModeTurn Mode = "turn"
	ModeNote Mode = "note"
)

// Role of a transcript message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleNote      Role = "note"
)

// Session state as reported by Session.State.
const (
	StateIdle    = "idle"
	StateRunning = "running"
	StatePaused  = "paused"
	StateClosed  = "closed"
)

// Close reasons accepted by CloseSession, and the reason compression writes.
const (
	ReasonCompression = "compression"
)

// CloseReasons are the reasons a client may close a session with (docs/contract.md §5).
var CloseReasons = []string{"cli_close", "new_session", "resumed_other", "branched", "tui_close", "tui_shutdown"}

// Admission is one durable entry in a session's FIFO (docs/contract.md §2, §11).
// Empty strings and zero times are absent values and marshal as JSON null.
type Admission struct {
	ID           string          // 128-bit hex: 48 bits of milliseconds, 80 random (NewAdmissionID)
	Session      string          //
	Seq          uint64          // FIFO position, strictly increasing per session
	Kind         Kind            //
	Producer     string          // automation only
	Principal    string          //
	RequestID    string          // human only, optional
	Identities   []string        // automation: the producer event identities it carries
	Payload      json.RawMessage // canonical JSON object with at least "text"
	PinnedTarget string          // automation: transcript the work was started from
	DeliveredTo  string          // transcript it was executed on, set when it runs
	Status       Status          //
	Outcome      Outcome         // set when done
	Mode         Mode            // set when it runs
	Epoch        uint64          // drain epoch that claimed it (0 until claimed)
	Generation   uint64          // session generation of its claim (0 until claimed)
	AdmittedAt   time.Time       //
	StartedAt    time.Time       //
	SettledAt    time.Time       //
	ReplayOf     string          // admission this one replays
	Error        string          // failure detail ("misrouted", stderr tail…)
	// Compacted marks a tombstone (Store.Compact): the admission's payload
	// is gone, PayloadSHA1 is its digest (PayloadDigest); everything else,
	// identities included, is kept.
	Compacted   bool
	PayloadSHA1 string
}

// Text returns the payload's "text" member, or "".
func (a *Admission) Text() string {
	var p struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(a.Payload, &p)
	return p.Text
}

// Session is the logical conversation that owns one FIFO (docs/contract.md §1, §11).
type Session struct {
	ID                string
	Owner             string
	Grants            []Grant // principals besides the owner and their roles, by principal
	CurrentTranscript string
	Closed            bool   // the current transcript has ended
	Epoch             uint64 // fencing token: +1 on each drain lease acquisition
	Generation        uint64 // +1 on each claim
	LeaseHolder       string // empty when no lease is held
	LeaseExpiresAt    time.Time
	NextSeq           uint64 // seq the next admission gets
	Queued            int    // admissions queued (the depth)
	Running           int    // admissions running
	Unknown           int    // admissions unknown
	Viewers           int    // live viewers at the time of the read
	CreatedAt         time.Time
}

// State derives the contract's session state: closed, paused (an unknown
// admission blocks the queue), running, or idle.
func (s *Session) State() string {
	switch {
	case s.Unknown > 0:
		return StatePaused
	case s.Running > 0:
		return StateRunning
	case s.Closed:
		return StateClosed
	default:
		return StateIdle
	}
}

// LeaseLive reports whether a drain lease is held and unexpired at now.
func (s *Session) LeaseLive(now time.Time) bool {
	return s.LeaseHolder != "" && now.Before(s.LeaseExpiresAt)
}

// Transcript is the physical record of a conversation (docs/contract.md §1, §5).
type Transcript struct {
	ID           string
	Session      string
	Parent       string // the transcript this one continues after compression
	Child        string // the compression child, once compressed
	EndedAt      time.Time
	EndReason    string
	MessageCount int
	NoteCount    int // note messages; a turn's notes_seen
	CreatedAt    time.Time
}

// Ended reports whether the transcript is closed.
func (t *Transcript) Ended() bool { return !t.EndedAt.IsZero() }

// Message is one transcript entry.
type Message struct {
	Transcript  string
	Seq         uint64 // 1-based position in the transcript
	Role        Role
	Content     string
	AdmissionID string
	CreatedAt   time.Time
	Metadata    map[string]any
}

// Viewer is a lease held by someone watching a session.
type Viewer struct {
	ID        string
	Session   string
	ExpiresAt time.Time
}

// Lease is a granted drain lease.
type Lease struct {
	Session   string
	Holder    string
	Epoch     uint64
	ExpiresAt time.Time
	// Recovered lists the admissions that acquiring this epoch moved from
	// running to unknown (left running by an older epoch).
	Recovered []string
}
