package storediff

import (
	"github.com/hermesq/hermesq/pkg/backend"
)

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
