package storediff

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// Judge replays ops on the reference model and returns the first step
// whose reply on the stores (tr, on which they agree) the model
// disagrees with.
func Judge(ops []Op, tr Trace) *Failure {
	f, _ := JudgeCount(ops, tr)
	return f
}

// JudgeCount is Judge, and the number of steps the model judged.
func JudgeCount(ops []Op, tr Trace) (*Failure, int) {
	judged := 0
	m := &model{clock: T0, sessions: map[string]*mSession{}, adm: map[string]*mAdm{}, seen: map[string]bool{}, trs: map[string]string{}, viewed: map[string]bool{}}
	for i, o := range ops {
		if i >= len(tr.Steps) {
			break
		}
		m.clock = m.clock.Add(time.Duration(o.Dt) * time.Second)
		st := tr.Steps[i]
		var reply any
		_ = json.Unmarshal([]byte(st.Reply), &reply)
		want, got, ok := m.judge(o, reply)
		if ok && want != got {
			return &Failure{Step: i, Detail: fmt.Sprintf("step %d: %s\n  model: %s\n  stores: %s", i, o, want, got)}, judged
		}
		if ok {
			judged++
		}
		m.observe(o, reply, st.State)
	}
	return nil, judged
}

func errOf(reply any) string {
	if x, ok := reply.(map[string]any); ok {
		if e, ok := x["err"].(string); ok {
			return e
		}
	}
	return ""
}

func code(name string) string {
	c, _, _ := strings.Cut(name, "/")
	return c
}

// judge returns the model's answer and the stores' for an op it holds
// the rules of (ok), in a form both are written in.
func (m *model) judge(o Op, reply any) (want, got string, ok bool) {
	sid := sessions[o.S]
	s := m.sessions[sid]
	gotErr := errOf(reply)
	switch o.Kind {
	case OpOpen:
		if s == nil && m.trs[sid] != "" && m.trs[sid] != sid {
			return "conflict", code(gotErr), true // a transcript of another session has that id
		}
		if gotErr != "" {
			return "ok", "error " + gotErr, true
		}
		r, _ := reply.(map[string]any)
		created, _ := r["created"].(bool)
		sess, _ := r["session"].(map[string]any)
		owner, _ := sess["owner"].(string)
		if s == nil {
			return "created true owner " + principals[o.P], fmt.Sprintf("created %v owner %s", created, owner), true
		}
		return "created false owner " + s.owner, fmt.Sprintf("created %v owner %s", created, owner), true
	case OpAdmitHuman, OpAdmitAuto:
		if o.Kind == OpAdmitAuto && o.N == 2 {
			return "", "", false // pinned to t1, which may be anyone's or no one's
		}
		res, _ := reply.([]any)
		if len(res) != 1 {
			return "one result", st(reply), true
		}
		return m.admitWant(o, m.sessions), admitGot(res[0]), true
	case OpSvcAdmit:
		// Service.Admit: a text is required (ErrInvalid without), human
		// input creates its session; then the store's rules.
		got := gotCode(reply)
		if res, _ := reply.([]any); len(res) == 1 {
			got = admitGot(res[0])
		}
		parts := len(o.Ids) > 0 && o.Flag // each part's text is never empty
		if o.X == "" && !parts || len(o.Ids) > 0 && o.N == 1 {
			return "invalid", got, true // no text; reopen is for human input
		}
		p := o
		if len(o.Ids) > 0 {
			p.Kind, p.N = OpAdmitAuto, 0
		} else {
			p.Kind, p.Flag = OpAdmitHuman, true
		}
		return m.admitWant(p, m.sessions), got, true
	case OpAdmitBatch:
		// The requests are independent: each is judged against the state
		// the ones before it left (the model applies them in order).
		for _, sub := range o.Sub {
			if sub.Kind == OpAdmitAuto && sub.N == 2 || sub.Kind == OpAdmitBad && sub.N == 7 {
				return "", "", false
			}
		}
		res, _ := reply.([]any)
		if len(res) != len(o.Sub) {
			return fmt.Sprintf("%d results", len(o.Sub)), st(reply), true
		}
		sim := m.cloneSessions()
		var w, g []string
		for i, sub := range o.Sub {
			if sub.Kind == OpAdmitBad {
				w = append(w, "invalid")
			} else {
				w = append(w, m.admitWant(sub, sim))
			}
			g = append(g, admitGot(res[i]))
			m.applyAdmit(sub, res[i], sim)
		}
		return strings.Join(w, "; "), strings.Join(g, "; "), true
	case OpAdmitBad:
		if o.N == 7 {
			return "", "", false // an id reused: conflict or duplicate by the store's history
		}
		res, _ := reply.([]any)
		if len(res) == 1 {
			return "invalid", admitGot(res[0]), true
		}
		return "invalid", st(reply), true
	case OpClaim:
		if o.A >= 0 && len(m.order) == 0 || (o.A < 0 && reply == nil) {
			return "", "", false
		}
		want := m.claimWant(o)
		if want == "ok" && gotErr == "" {
			// Claimed: running under the session's epoch, generation+1.
			r, _ := reply.(map[string]any)
			g, _ := r["generation"].(float64)
			return fmt.Sprintf("ok running generation %d", s.generation+1), fmt.Sprintf("ok %v generation %d", r["status"], int(g)), true
		}
		return want, gotCode(reply), true
	case OpSettleHead:
		if reply == nil || s == nil || o.Flag && m.viewed[sid] {
			return "", "", false // nothing queued; or a viewer the store counts by its own clock
		}
		want := "ok"
		switch {
		case !s.mayDrain():
			want = "forbidden"
		case m.busy(sid) || o.X != "" && o.X != s.current:
			want = "conflict" // busy, or moved
		}
		return want, gotCode(reply), true
	case OpSettle:
		if o.A >= 0 && len(m.order) == 0 || o.N%len(outcomes) == 4 || reply == nil {
			return "", "", false
		}
		if o.A < 0 {
			return "", "", false // the running one, found by the runner
		}
		return m.settleWant(o), gotCode(reply), true
	case OpCancel:
		if o.A < 0 || len(m.order) == 0 {
			return "", "", false
		}
		a := m.adm[m.ref(o.A)]
		want := "ok"
		switch {
		case a == nil:
			want = "not_found"
		case a.status != string(backend.StatusQueued):
			want = "conflict"
		}
		return want, gotCode(reply), true
	case OpResolve:
		if o.A < 0 || len(m.order) == 0 {
			return "", "", false
		}
		a := m.adm[m.ref(o.A)]
		want := "ok"
		switch {
		case o.N%len(resolutions) == 3:
			want = "invalid"
		case a == nil:
			want = "not_found"
		case a.status != string(backend.StatusUnknown):
			want = "conflict"
		}
		return want, gotCode(reply), true
	case OpClose:
		want := "ok"
		switch {
		case o.N == 0:
			want = "invalid"
		case s == nil:
			want = "not_found"
		case s.closed || m.busyOrQueued(sid):
			want = "conflict" // closed, or busy
		}
		return want, gotCode(reply), true
	case OpAcquire:
		want := "ok"
		switch {
		case s == nil:
			want = "not_found"
		case !backend.Permits(s.owner, s.grants, s.drainer(o.P), backend.ActDrain, ""):
			want = "forbidden"
		case s.leaseHolder != "" && s.leaseHolder != holders[o.H] && m.clock.Before(s.leaseExpires):
			want = "fenced" // lease held
		}
		if want == "ok" && gotErr == "" {
			r, _ := reply.(map[string]any)
			e, _ := r["epoch"].(float64)
			if r["epoch"] == nil {
				e, _ = r["Epoch"].(float64)
			}
			return fmt.Sprintf("ok epoch %d", s.epoch+1), fmt.Sprintf("ok epoch %d", int(e)), true
		}
		return want, gotCode(reply), true
	case OpGrant:
		bad := roles[o.N%len(roles)] == "boss" || s != nil && principals[o.P] == s.owner
		want := "ok"
		switch {
		case s == nil && bad:
			return "", "", false // which is told first is the store's
		case bad:
			want = "invalid" // an unknown role, or a grant to the owner
		case s == nil:
			want = "not_found"
		}
		return want, gotCode(reply), true
	case OpRevoke:
		want := "ok"
		switch {
		case s == nil:
			want = "not_found"
		case !slices.ContainsFunc(s.grants, func(g backend.Grant) bool { return g.Principal == principals[o.P] }):
			want = "not_found"
		}
		return want, gotCode(reply), true
	case OpCompact:
		if s == nil {
			return "not_found", gotCode(reply), true
		}
		before := o.C.Time(m.clock, m.settledOf(o.C))
		want := m.selection(sid, before, o.N)
		return "compacted " + strings.Join(want, ","), compactedGot(reply), true
	case OpSvcCompact:
		d := time.Duration(o.C.Off)
		before := m.clock.Add(-d).UTC()
		switch {
		case d <= 0, before.Before(time.Unix(0, 0)):
			return "invalid", gotCode(reply), true
		case !o.Flag && s == nil:
			return "not_found", gotCode(reply), true
		}
		n := 0
		for id := range m.sessions {
			if o.Flag || id == sid {
				n += len(m.selection(id, before, 0))
			}
		}
		r, _ := reply.(map[string]any)
		c, _ := r["compacted"].(float64)
		if gotErr != "" {
			return fmt.Sprintf("compacted %d", n), "error " + gotErr, true
		}
		return fmt.Sprintf("compacted %d", n), fmt.Sprintf("compacted %d", int(c)), true
	}
	return "", "", false
}

func st(v any) string { b, _ := json.Marshal(v); return string(b) }

func gotCode(reply any) string {
	if e := errOf(reply); e != "" {
		return code(e)
	}
	return "ok"
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

func compactedGot(reply any) string {
	if e := errOf(reply); e != "" {
		return code(e)
	}
	r, _ := reply.(map[string]any)
	var ids []string
	if l, ok := r["Compacted"].([]any); ok {
		for _, x := range l {
			ids = append(ids, fmt.Sprint(x))
		}
	}
	return "compacted " + strings.Join(ids, ",")
}

func (m *model) cloneSessions() map[string]*mSession {
	out := map[string]*mSession{}
	for k, v := range m.sessions {
		c := *v
		out[k] = &c
	}
	return out
}

// admitWant is the model's result of one admit: "admitted seq N",
// "coalesced seq N", "duplicate of ID", or an error code.
func (m *model) admitWant(o Op, ss map[string]*mSession) string {
	sid := sessions[o.S]
	s := ss[sid]
	who := principals[o.P]
	if o.Kind == OpAdmitHuman {
		if s == nil {
			if !o.Flag {
				return "not_found"
			}
			if m.trs[sid] != "" && m.trs[sid] != sid {
				return "conflict" // a transcript of another session has that id
			}
			return "admitted seq 1"
		}
		if !backend.Permits(s.owner, s.grants, who, backend.ActAdmitHuman, "") {
			return "forbidden"
		}
		payload := string(textPayload(o.X))
		if o.R >= 0 {
			for _, a := range m.adm {
				if a.session == sid && a.principal == who && a.request == requestIDs[o.R] {
					// A tombstone compares by digest: the same
					// payload still is a duplicate.
					if a.payload == payload {
						return "duplicate of " + a.id
					}
					return "conflict"
				}
			}
		}
		if s.closed && o.N != 1 {
			return "conflict"
		}
		return fmt.Sprintf("admitted seq %d", s.nextSeq)
	}
	if s == nil {
		return "not_found"
	}
	if !backend.Permits(s.owner, s.grants, who, backend.ActAdmitAutomation, "process") {
		return "forbidden"
	}
	var fresh []string
	dup := ""
	for _, id := range identityNames(o.Ids) {
		if a := m.holder(sid, id); a != nil {
			if dup == "" {
				dup = a.id
			}
			continue
		}
		fresh = append(fresh, id)
	}
	switch {
	case len(fresh) == 0:
		return "duplicate of " + dup
	case len(fresh) == 1:
		return fmt.Sprintf("admitted seq %d", s.nextSeq)
	}
	return fmt.Sprintf("coalesced seq %d", s.nextSeq)
}

func (m *model) holder(sid, identity string) *mAdm {
	for _, a := range m.adm {
		if a.session == sid && slices.Contains(a.identities, identity) {
			return a
		}
	}
	return nil
}

func admitGot(x any) string {
	r, _ := x.(map[string]any)
	if e, ok := r["Err"].(string); ok {
		return code(e)
	}
	a, _ := r["Admission"].(map[string]any)
	res, _ := r["Result"].(string)
	if res == backend.ResultDuplicate {
		return fmt.Sprintf("duplicate of %v", a["id"])
	}
	seq, _ := a["seq"].(float64)
	return fmt.Sprintf("%s seq %d", res, int(seq))
}

// applyAdmit records in ss what an admit of a batch did (the session it
// created, the seq it took), so the next request of the batch is judged
// against it.
func (m *model) applyAdmit(o Op, res any, ss map[string]*mSession) {
	r, _ := res.(map[string]any)
	a, _ := r["Admission"].(map[string]any)
	if _, isErr := r["Err"]; isErr || a == nil {
		return
	}
	sid := sessions[o.S]
	if ss[sid] == nil {
		ss[sid] = &mSession{owner: principals[o.P], current: sid, nextSeq: 1}
	}
	if seq, _ := a["seq"].(float64); uint64(seq) >= ss[sid].nextSeq {
		ss[sid].nextSeq = uint64(seq) + 1
	}
	if o.Kind == OpAdmitHuman && o.N == 1 {
		ss[sid].closed = false // reopened
	}
	m.upsert(a)
}

// busy: the session has a running or unknown admission.
func (m *model) busy(sid string) bool {
	for _, a := range m.adm {
		if a.session == sid && (a.status == string(backend.StatusRunning) || a.status == string(backend.StatusUnknown)) {
			return true
		}
	}
	return false
}

// busyOrQueued: the session has a queued, running or unknown admission.
func (m *model) busyOrQueued(sid string) bool {
	for _, a := range m.adm {
		if a.session == sid && a.status != string(backend.StatusDone) {
			return true
		}
	}
	return false
}

func (m *model) claimWant(o Op) string {
	sid := sessions[o.S]
	s := m.sessions[sid]
	if s == nil {
		return "not_found"
	}
	if o.Flag {
		return "fenced" // the epoch before the current one
	}
	if !s.mayDrain() {
		return "forbidden"
	}
	var head *mAdm
	busy := false
	for _, a := range m.adm {
		if a.session != sid {
			continue
		}
		switch a.status {
		case string(backend.StatusRunning), string(backend.StatusUnknown):
			busy = true
		case string(backend.StatusQueued):
			if head == nil || a.seq < head.seq {
				head = a
			}
		}
	}
	if busy {
		return "conflict" // busy
	}
	if o.A < 0 {
		return "ok" // the runner claims the head it found
	}
	a := m.adm[m.ref(o.A)]
	switch {
	case a == nil || a.session != sid:
		return "not_found"
	case head == nil || head.id != a.id:
		return "conflict" // not the head
	}
	return "ok"
}

func (m *model) settleWant(o Op) string {
	sid := sessions[o.S]
	s := m.sessions[sid]
	if s == nil {
		return "not_found"
	}
	a := m.adm[m.ref(o.A)]
	if a == nil || a.session != sid {
		return "not_found"
	}
	gen := a.generation
	if o.Flag {
		gen++
	}
	if a.status != string(backend.StatusRunning) || a.epoch != s.epoch || gen != s.generation {
		return "fenced"
	}
	return "ok"
}

// observe takes into the model what the stores agreed the step did: every
// admission in the reply, and the session's state after it.
func (m *model) observe(o Op, reply any, state string) {
	switch o.Kind {
	case OpAdmitHuman, OpAdmitAuto, OpAdmitBad, OpAdmitBatch, OpSvcAdmit:
		res, _ := reply.([]any)
		for _, x := range res {
			r, _ := x.(map[string]any)
			if a, ok := r["Admission"].(map[string]any); ok {
				m.see(a)
				// A human admit may have created its session (the
				// state after the step is read for o.S alone).
				sid, _ := a["session"].(string)
				if sid != "" && m.sessions[sid] == nil {
					owner, _ := a["principal"].(string)
					m.sessions[sid] = &mSession{owner: owner, current: sid, nextSeq: 1}
					m.trs[sid] = sid
				}
			}
		}
		// A batch's requests may reopen sessions other than o.S, whose
		// state alone is read after the step.
		if o.Kind == OpAdmitBatch {
			for i, sub := range o.Sub {
				if i < len(res) && sub.Kind != OpAdmitBad {
					m.applyAdmit(sub, res[i], m.sessions)
				}
			}
		}
	case OpAcquire:
		if s := m.sessions[sessions[o.S]]; s != nil && errOf(reply) == "" {
			s.leasePrincipal = s.drainer(o.P)
		}
	case OpViewer:
		m.viewed[sessions[o.S]] = true
	case OpReplay:
		res, _ := reply.([]any)
		for _, x := range res {
			r, _ := x.(map[string]any)
			if a, ok := r["admission"].(map[string]any); ok {
				m.see(a)
			}
		}
	case OpCompact:
		r, _ := reply.(map[string]any)
		if l, ok := r["Compacted"].([]any); ok {
			for _, id := range l {
				if a := m.adm[fmt.Sprint(id)]; a != nil {
					a.compacted = true
				}
			}
		}
	case OpSvcCompact:
		r, _ := reply.(map[string]any)
		ss, _ := r["sessions"].([]any)
		for _, x := range ss {
			sc, _ := x.(map[string]any)
			l, _ := sc["compacted"].([]any)
			for _, id := range l {
				if a := m.adm[fmt.Sprint(id)]; a != nil {
					a.compacted = true
				}
			}
		}
	}
	walk(reply, func(x map[string]any) {
		if _, ok := x["seq"]; ok {
			if _, ok := x["status"]; ok {
				m.upsert(x)
			}
		}
	})
	m.syncState(sessions[o.S], state)
}

func walk(x any, fn func(map[string]any)) {
	switch v := x.(type) {
	case map[string]any:
		fn(v)
		for _, e := range v {
			walk(e, fn)
		}
	case []any:
		for _, e := range v {
			walk(e, fn)
		}
	}
}

// see records an admission's first appearance, as Runner.see does.
func (m *model) see(a map[string]any) {
	id, _ := a["id"].(string)
	if id == "" || m.seen[id] {
		return
	}
	m.seen[id] = true
	m.order = append(m.order, id)
}

func (m *model) upsert(x map[string]any) {
	id, _ := x["id"].(string)
	if id == "" {
		return
	}
	a := m.adm[id]
	if a == nil {
		a = &mAdm{id: id}
		m.adm[id] = a
	}
	str := func(k string) string { s, _ := x[k].(string); return s }
	num := func(k string) uint64 { f, _ := x[k].(float64); return uint64(f) }
	a.session, a.kind, a.principal, a.request = str("session"), str("kind"), str("principal"), str("request_id")
	a.seq, a.epoch, a.generation = num("seq"), num("epoch"), num("generation")
	a.status, a.outcome = str("status"), str("outcome")
	a.identities = nil
	if l, ok := x["identities"].([]any); ok {
		for _, i := range l {
			a.identities = append(a.identities, fmt.Sprint(i))
		}
	}
	if p, ok := x["payload"]; ok {
		a.payload = st(p)
	}
	if c, ok := x["compacted"].(bool); ok && c {
		a.compacted = true
	}
	if t, err := time.Parse(time.RFC3339Nano, str("settled_at")); err == nil {
		a.settledAt = t
	} else {
		a.settledAt = time.Time{}
	}
	if s := m.sessions[a.session]; s != nil && a.seq >= s.nextSeq {
		s.nextSeq = a.seq + 1
	}
}

// syncState takes the session's state after a step from the stores.
func (m *model) syncState(sid, state string) {
	var v struct {
		Owner             string
		Grants            []backend.Grant
		CurrentTranscript string
		Closed            bool
		Epoch, Generation uint64
		NextSeq           uint64
		LeaseHolder       string
		LeaseExpiresAt    time.Time
		Admissions        []string
		Err               string `json:"err"`
	}
	if json.Unmarshal([]byte(state), &v) != nil || v.Err != "" || v.Owner == "" {
		return
	}
	s := m.sessions[sid]
	if s == nil {
		s = &mSession{}
		m.sessions[sid] = s
	}
	s.owner, s.grants, s.current, s.closed = v.Owner, v.Grants, v.CurrentTranscript, v.Closed
	m.trs[sid] = sid
	if v.CurrentTranscript != "" {
		m.trs[v.CurrentTranscript] = sid
	}
	s.epoch, s.generation, s.nextSeq = v.Epoch, v.Generation, v.NextSeq
	s.leaseHolder, s.leaseExpires = v.LeaseHolder, v.LeaseExpiresAt
	for _, l := range v.Admissions {
		f := strings.SplitN(l, ":", 4)
		if len(f) != 4 {
			continue
		}
		if a := m.adm[f[1]]; a != nil {
			a.status, a.outcome = f[2], f[3]
		}
	}
}
