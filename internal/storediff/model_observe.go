package storediff

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

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
