// Package storediff is a differential, model-based test of the stores:
// random sequences of operations are applied to every store given (bbolt,
// Redis, Redis Cluster), every reply is compared after ids and times are
// normalised, the final exports are compared, and a reference model of the
// contract (docs/contract.md) judges the operations it covers. A failing
// sequence is shrunk and reported with the seed that replays it.
//
// Operations go to the backend.Store interface directly, with the
// request's Now taken from a steered clock, except where the decision lives
// in pkg/admission: Service.Admit (validation), Service.Replay and
// Service.Compact (the cutoff check) run through an admission.Service over
// the store, its clock the same steered clock.
package storediff

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// T0 is the start of the steered clock.
var T0 = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// Kinds of operation.
const (
	OpOpen        = "open"         // OpenSession(S, owner P)
	OpAdmitHuman  = "admit-human"  // Store.Admit, human, request id R, text X
	OpAdmitAuto   = "admit-auto"   // Store.Admit, automation, identities Ids (parts when Flag)
	OpAdmitBad    = "admit-bad"    // Store.Admit of a malformed request (variant N)
	OpAdmitBatch  = "admit-batch"  // Store.Admit of N requests in one call
	OpSvcAdmit    = "svc-admit"    // Service.Admit, human or automation; text X may be empty (invalid)
	OpGrant       = "grant"        // Grant(S, P, role N)
	OpRevoke      = "revoke"       // Revoke(S, P)
	OpAcquire     = "acquire"      // AcquireLease(S, holder H, as principal P; -1: the owner)
	OpRelease     = "release"      // ReleaseLease(S, holder H, current epoch)
	OpClaim       = "claim"        // Claim(S, admission A or the head, epoch current or stale)
	OpSettle      = "settle"       // Settle the running admission (or A) of S
	OpSettleHead  = "settle-head"  // Settle with Direct the head of S (Unwatched when Flag)
	OpSettleRun   = "settle-run"   // SettleRun of the next N queued of S as notes
	OpSettleClaim = "settle-claim" // SettleClaim: the running one settled, the head claimed
	OpRequeue     = "requeue"      // Requeue the running admission of S
	OpResolve     = "resolve"      // Resolve(A, as N)
	OpCancel      = "cancel"       // Cancel(A)
	OpViewer      = "viewer"       // AddViewer(S, ttl N s)
	OpUnview      = "unview"       // RemoveViewer(S, viewer V)
	OpClose       = "close"        // CloseSession(S, reason N)
	OpCompress    = "compress"     // Compress(S, child X)
	OpSwitch      = "switch"       // Switch(S, transcript X)
	OpCompact     = "compact"      // Store.Compact(S, cutoff C, limit N)
	OpSvcCompact  = "svc-compact"  // Service.Compact(S or all, older than C)
	OpReplay      = "replay"       // Service.Replay(A, again when Flag)
	OpReimport    = "reimport"     // Export, then Import of the export into the same store
)

// Op is one operation of a sequence. Its fields are abstract: a session
// by index, an admission by its order of appearance (or -1 for the one the
// operation finds: the head, the running one), so the same Op means the
// same thing on every store that has agreed so far.
type Op struct {
	Kind string
	Dt   int    // seconds the clock advances before the operation
	S    int    // session index (sessions[S])
	P    int    // principal index (principals[P])
	A    int    // admission by order of appearance; -1: the one the op finds
	N    int    // variant, count, role, reason, limit…
	R    int    // request id index; -1: none
	X    string // text, transcript name
	Ids  []int  // identity indexes
	Flag bool
	C    Cutoff
	H    int // lease holder index
	V    int // viewer by order of appearance
	Sub  []Op
}

// Cutoff is a compaction cutoff: an extreme fixed time, or an offset from
// the clock (or from the settle time of an admission) in nanoseconds.
type Cutoff struct {
	Name string // "min-int64", "-1ns", "epoch", "year1", "year9999", "max-int64", "clock", "settled"
	Off  int64  // ns added (clock, settled)
	A    int    // settled: the admission whose settle time is the base
}

var (
	sessions   = []string{"s1", "s2", "s-3"}
	principals = []string{"alice", "bob", "carol", "dave"}
	holders    = []string{"h1", "h2"}
	texts      = []string{"hi", "again", "x", "a longer text, with \"quotes\" and ünicode"}
	requestIDs = []string{"r1", "r2", "r3"}
	identities = []string{"e1", "e2", "e3", "e4", "e5", "e6"}
	transcript = []string{"t1", "t2", "s2", "s1", "u"}
)

func (c Cutoff) String() string {
	switch c.Name {
	case "clock", "settled":
		s := c.Name
		if c.Name == "settled" {
			s = fmt.Sprintf("settled(#%d)", c.A)
		}
		if c.Off != 0 {
			s += fmt.Sprintf("%+dns", c.Off)
		}
		return s
	}
	return c.Name
}

// Time resolves the cutoff against the clock and a settle time.
func (c Cutoff) Time(clock, settled time.Time) time.Time {
	switch c.Name {
	case "min-int64":
		return time.Unix(0, math.MinInt64).UTC()
	case "-1ns":
		return time.Unix(0, -1).UTC()
	case "epoch":
		return time.Unix(0, 0).UTC()
	case "year1":
		return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	case "year1969":
		return time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)
	case "year9999":
		return time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	case "max-int64":
		return time.Unix(0, math.MaxInt64).UTC()
	case "settled":
		if settled.IsZero() {
			return clock.Add(time.Duration(c.Off))
		}
		return settled.Add(time.Duration(c.Off))
	default:
		return clock.Add(time.Duration(c.Off))
	}
}

func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", o.Kind)
	if o.Dt != 0 {
		fmt.Fprintf(&b, " +%ds", o.Dt)
	}
	sess := sessions[o.S]
	ref := func(a int) string {
		if a < 0 {
			return "found"
		}
		return fmt.Sprintf("#%d", a)
	}
	switch o.Kind {
	case OpOpen:
		fmt.Fprintf(&b, " %s owner=%s", sess, principals[o.P])
	case OpAdmitHuman, OpAdmitAuto, OpSvcAdmit:
		fmt.Fprintf(&b, " %s by=%s", sess, principals[o.P])
		if o.R >= 0 && o.Kind != OpAdmitAuto && len(o.Ids) == 0 {
			fmt.Fprintf(&b, " req=%s", requestIDs[o.R])
		}
		if len(o.Ids) > 0 {
			fmt.Fprintf(&b, " ids=%v", identityNames(o.Ids))
		}
		fmt.Fprintf(&b, " text=%q", o.X)
		switch {
		case o.Flag && o.Kind == OpAdmitHuman:
			b.WriteString(" create")
		case o.Flag && len(o.Ids) > 0:
			b.WriteString(" parts")
		}
		if o.N != 0 {
			fmt.Fprintf(&b, " n=%d", o.N)
		}
	case OpAdmitBad:
		fmt.Fprintf(&b, " %s variant=%d", sess, o.N)
	case OpAdmitBatch:
		b.WriteString(" [")
		for i, s := range o.Sub {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(s.String())
		}
		b.WriteString("]")
	case OpGrant:
		fmt.Fprintf(&b, " %s %s role=%s", sess, principals[o.P], roles[o.N%len(roles)])
	case OpRevoke:
		fmt.Fprintf(&b, " %s %s", sess, principals[o.P])
	case OpAcquire:
		fmt.Fprintf(&b, " %s holder=%s as=%s", sess, holders[o.H], drainerName(o.P))
	case OpRelease:
		fmt.Fprintf(&b, " %s holder=%s", sess, holders[o.H])
	case OpClaim:
		fmt.Fprintf(&b, " %s %s stale=%v mode=%d", sess, ref(o.A), o.Flag, o.N)
	case OpSettle:
		fmt.Fprintf(&b, " %s %s outcome=%d stale=%v", sess, ref(o.A), o.N, o.Flag)
	case OpSettleHead:
		fmt.Fprintf(&b, " %s unwatched=%v mode=%d expect=%q", sess, o.Flag, o.N, o.X)
	case OpSettleRun:
		fmt.Fprintf(&b, " %s n=%d unwatched=%v", sess, o.N, o.Flag)
	case OpSettleClaim:
		fmt.Fprintf(&b, " %s outcome=%d next=%s", sess, o.N, ref(o.A))
	case OpRequeue:
		fmt.Fprintf(&b, " %s", sess)
	case OpResolve:
		fmt.Fprintf(&b, " %s as=%s", ref(o.A), resolutions[o.N%len(resolutions)])
	case OpCancel:
		fmt.Fprintf(&b, " %s", ref(o.A))
	case OpViewer:
		fmt.Fprintf(&b, " %s ttl=%ds", sess, o.N)
	case OpUnview:
		fmt.Fprintf(&b, " %s viewer=#%d", sess, o.V)
	case OpClose:
		fmt.Fprintf(&b, " %s reason=%s", sess, closeReason(o.N))
	case OpCompress, OpSwitch:
		fmt.Fprintf(&b, " %s %s", sess, o.X)
	case OpCompact:
		fmt.Fprintf(&b, " %s before=%s limit=%d", sess, o.C, o.N)
	case OpSvcCompact:
		s := sess
		if o.Flag {
			s = "all"
		}
		fmt.Fprintf(&b, " %s older-than=%s", s, time.Duration(o.C.Off))
	case OpReplay:
		fmt.Fprintf(&b, " %s again=%v by=%s", ref(o.A), o.Flag, principals[o.P])
	}
	return b.String()
}

func identityNames(ix []int) []string {
	out := make([]string, len(ix))
	for i, x := range ix {
		out[i] = identities[x]
	}
	return out
}

func closeReason(n int) string {
	if n == 0 {
		return "bogus"
	}
	return closeReasons[(n-1)%len(closeReasons)]
}
