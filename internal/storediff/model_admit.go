package storediff

import (
	"fmt"
	"slices"

	"github.com/hermesq/hermesq/pkg/backend"
)

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
