package storediff

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

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
