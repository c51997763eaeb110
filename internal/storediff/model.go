package storediff

import (
	"slices"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// The reference model: the contract (docs/contract.md §1, §2, §8) as a
// small in-memory state machine. It judges the operations whose rules it
// holds, each against the state before it:
//
//   - open: a new session is created with its owner, an existing one is
//     returned unchanged (created false, owner kept);
//   - admit, human (alone or in a batch): an unknown session is created
//     (owner: the principal) with CreateSession, else not_found; a
//     principal the session's grants do not permit is forbidden; the same
//     session, principal and request id with the same payload is a
//     duplicate of the admission holding it, with another payload a
//     conflict; a closed current transcript is closed unless Reopen; else
//     a new queued admission at the session's next seq;
//   - admit, automation: unknown session not_found, forbidden as above;
//     every identity the session holds (tombstones included) resolves to
//     its admission; the identities not held make one new admission
//     (admitted, or coalesced with more than one) at the next seq; none
//     left: duplicate;
//   - claim: not_found (session), fenced (epoch), busy (a running or
//     unknown admission), not_found (admission of another session),
//     not-head (not the queued admission of lowest seq), else running
//     under the session's generation+1;
//   - settle of the queued head (direct, under the current epoch): busy,
//     or moved when the drainer expected another current transcript;
//     else done (with a viewer and Unwatched, not judged: the stores
//     count viewers by their own clock);
//   - settle of a claimed turn: not_found (session, admission of another
//     session), fenced unless running under the session's epoch and
//     generation, else done with the outcome;
//   - cancel: not_found, conflict unless queued, else done (cancelled);
//   - resolve: invalid for an unknown resolution, not_found, conflict
//     unless unknown;
//   - close: invalid for an unknown reason, not_found, conflict when
//     closed already or when an admission is queued, running or unknown;
//   - acquire: not_found, fenced while another holder's lease is live at
//     the request's time, else the epoch after the session's;
//   - grant: invalid for an unknown role or a grant to the owner,
//     not_found for an unknown session; revoke: not_found for an unknown
//     session or a principal without a grant;
//   - Service.Admit: invalid without text and for automation input asked
//     to reopen; then the store's rules above, human input creating its
//     session;
//   - compact (store): not_found for an unknown session; else the done
//     admissions not yet compacted whose settle time is strictly before
//     the cutoff, in seq order, at most Limit: whatever the cutoff, the
//     extremes included;
//   - compact (service): invalid for a non-positive older-than and for a
//     cutoff before 1970; not_found for an unknown session; else the same
//     selection with the cutoff clock - older-than.
//
// Where a rule is not held (payload_differs, the payload built of parts,
// viewers and moves, direct settles, runs, settle-claims, requeue,
// compress, switch, replay, import), the model takes the state the stores agreed on
// from their replies and the session state after the step, and judges
// the next step from there.
type model struct {
	clock    time.Time
	sessions map[string]*mSession
	adm      map[string]*mAdm  // by normalised id
	order    []string          // admissions by order of appearance (Runner.adm)
	trs      map[string]string // transcript -> its session, as seen current
	viewed   map[string]bool   // sessions a viewer was added to
	seen     map[string]bool
}

type mSession struct {
	owner             string
	grants            []backend.Grant
	epoch, generation uint64
	current           string
	closed            bool
	nextSeq           uint64
	leaseHolder       string
	leaseExpires      time.Time
	leasePrincipal    string // who the last lease was taken as: claims are checked against it
}

// mayDrain is the drain right of the session's lease principal, checked
// by every claim (docs/contract.md §10): backend.Permits, the one rule.
func (s *mSession) mayDrain() bool {
	return backend.Permits(s.owner, s.grants, s.leasePrincipal, backend.ActDrain, "")
}

// drainer is the principal an acquire asks for.
func (s *mSession) drainer(p int) string {
	if p < 0 {
		return s.owner
	}
	return principals[p]
}

type mAdm struct {
	id, session        string
	seq                uint64
	kind               string
	principal, request string
	identities         []string
	payload            string
	status, outcome    string
	epoch, generation  uint64
	settledAt          time.Time
	compacted          bool
}

func (m *model) ref(a int) string {
	if len(m.order) == 0 {
		return ""
	}
	return m.order[a%len(m.order)]
}

func (m *model) settledOf(c Cutoff) time.Time {
	if c.Name != "settled" || len(m.order) == 0 {
		return time.Time{}
	}
	if a := m.adm[m.ref(c.A)]; a != nil {
		return a.settledAt
	}
	return time.Time{}
}

// selection is what compaction of sid before the cutoff turns into
// tombstones, in seq order: done, not compacted, settled strictly before.
func (m *model) selection(sid string, before time.Time, limit int) []string {
	var as []*mAdm
	for _, a := range m.adm {
		if a.session == sid && a.status == string(backend.StatusDone) && !a.compacted && a.settledAt.Before(before) {
			as = append(as, a)
		}
	}
	slices.SortFunc(as, func(x, y *mAdm) int { return int(x.seq) - int(y.seq) })
	if limit > 0 && len(as) > limit {
		as = as[:limit]
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.id
	}
	return out
}

func (m *model) cloneSessions() map[string]*mSession {
	out := map[string]*mSession{}
	for k, v := range m.sessions {
		c := *v
		out[k] = &c
	}
	return out
}
