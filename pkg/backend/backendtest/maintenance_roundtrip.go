package backendtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var maintenanceRoundTripTests = []suiteTest{
	{name: "ExportImportRandom", fresh: testExportImportRandom},
}

// A property: whatever a store holds after random admissions (human and
// automation, duplicates and coalesced groups), turns, notes, unknowns,
// cancels, grants, tombstones (compact) and lineage (compress, switch,
// close), its export passes
// the import check (backend.CheckRecords), imports into a fresh store, and
// that store exports the same records, line for line.
func testExportImportRandom(t *testing.T, newStore func(t *testing.T) backend.Store) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			src := newStore(t)
			randomHistory(t, src, rand.New(rand.NewPCG(seed, seed*7919)), 200)
			recs := export(t, src)
			kinds := map[string]int{}
			for _, r := range recs {
				switch {
				case r.Session != nil:
					kinds["sessions"]++
				case r.Transcript != nil:
					kinds["transcripts"]++
				case r.Message != nil:
					kinds["messages"]++
				case r.Admission != nil:
					kinds["admissions"]++
				case r.Tombstone != nil:
					kinds["tombstones"]++
				}
			}
			t.Logf("%d records: %v", len(recs), kinds)
			noErr(t, "check the export as an import", backend.CheckRecords(ctxOf(t), nil, recs))
			dst := newStore(t)
			noErr(t, "import into a fresh store", importErr(t, dst, recs))
			want, got := exportLines(t, recs), exportLines(t, export(t, dst))
			if len(got) != len(want) {
				t.Fatalf("round trip: %d records, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("round trip: record %d differs:\n got %s\nwant %s", i+1, got[i], want[i])
				}
			}
			noErr(t, "import again (a no-op)", importErr(t, dst, recs))
		})
	}
}

// exportLines encodes records as export writes them (no grants is []).
func exportLines(t *testing.T, recs []backend.Record) []string {
	t.Helper()
	out := make([]string, len(recs))
	for i, r := range recs {
		if r.Session != nil && r.Session.Grants == nil {
			s := *r.Session
			s.Grants = []backend.Grant{}
			r.Session = &s
		}
		b, err := json.Marshal(r)
		noErr(t, "encode record", err)
		out[i] = string(b)
	}
	return out
}

// tolerated are the refusals a random history runs into by design (a
// session busy or closed, a lease held, a request id reused).
func tolerated(err error) bool {
	return err == nil || errors.Is(err, backend.ErrConflict) || errors.Is(err, backend.ErrFenced) || errors.Is(err, backend.ErrNotFound)
}

var randomTexts = []string{"hello", "naïve café ☕", "tab\tand\nnewline", "esc \x1b[31m red", "<html> & \"quotes\"", "\u202eevil", "🙂 emoji"}

// randomHistory applies n random operations to s through the store API.
func randomHistory(t *testing.T, s backend.Store, r *rand.Rand, n int) {
	t.Helper()
	var sessions []string
	now := T0
	pick := func() string { return sessions[r.IntN(len(sessions))] }
	check := func(what string, err error) {
		t.Helper()
		if !tolerated(err) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for i := 0; i < n; i++ {
		now = now.Add(time.Duration(1+r.IntN(5000)) * time.Millisecond)
		if len(sessions) == 0 || r.IntN(12) == 0 {
			id := fmt.Sprintf("r%d", len(sessions))
			_, _, err := s.OpenSession(ctxOf(t), backend.OpenSessionRequest{ID: id, Owner: Owner, Now: now})
			check("open", err)
			sessions = append(sessions, id)
			continue
		}
		sid := pick()
		text := randomTexts[r.IntN(len(randomTexts))] + fmt.Sprint(" ", i)
		switch op := r.IntN(10); op {
		case 0, 1: // human, with a request id half of the time (some reused)
			req := backend.AdmitRequest{Session: sid, Kind: backend.KindHuman, Principal: Owner, Payload: Payload(text), Now: now, Reopen: r.IntN(2) == 0}
			if r.IntN(2) == 0 {
				req.RequestID = fmt.Sprintf("req-%d", r.IntN(6))
			}
			res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{req})
			check("admit human", err)
			if err == nil {
				check("admit human", res[0].Err)
			}
		case 2, 3: // automation: identities from a small pool, so groups overlap
			k := 1 + r.IntN(3)
			ids := make([]string, 0, k)
			for j := 0; j < k; j++ {
				ids = append(ids, fmt.Sprintf("ev:%d", r.IntN(12)))
			}
			req := autoReq(sid, text, dedupe(ids)...)
			req.Now = now
			res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{req})
			check("admit automation", err)
			if err == nil {
				check("admit automation", res[0].Err)
			}
		case 4, 5: // run the head: a turn, a note, or left running
			runHead(t, s, r, sid, now, check)
		case 6:
			_, err := s.Compress(ctxOf(t), sid, fmt.Sprintf("%s.c%d", sid, i), now)
			check("compress", err)
		case 7:
			if r.IntN(2) == 0 {
				_, err := s.CloseSession(ctxOf(t), sid, backend.CloseReasons[r.IntN(len(backend.CloseReasons))], now)
				check("close", err)
			} else {
				_, err := s.Switch(ctxOf(t), sid, fmt.Sprintf("%s.s%d", sid, i), now)
				check("switch", err)
			}
		case 8:
			as, err := s.ListAdmissions(ctxOf(t), sid, backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued, backend.StatusUnknown}})
			check("list", err)
			for _, a := range as {
				if a.Status == backend.StatusUnknown {
					res := []backend.Resolution{backend.ResolveCompleted, backend.ResolveInterrupted, backend.ResolveRequeue}[r.IntN(3)]
					_, err = s.Resolve(ctxOf(t), a.ID, res, now)
				} else if r.IntN(3) == 0 {
					_, err = s.Cancel(ctxOf(t), a.ID, now)
				}
				check("resolve or cancel", err)
			}
		case 9:
			if r.IntN(3) == 0 { // old settled admissions become tombstones
				_, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: sid, Before: now.Add(-time.Duration(r.IntN(30)) * time.Second)})
				check("compact", err)
				continue
			}
			g := backend.Grant{Principal: fmt.Sprintf("friend-%d", r.IntN(3)), Role: backend.GrantRoles[r.IntN(len(backend.GrantRoles))]}
			if g.Role == backend.RoleWriter && r.IntN(2) == 0 {
				g.Producers = []string{Producer, "watch"}
			}
			check("grant", s.Grant(ctxOf(t), sid, g))
		}
	}
}

func dedupe(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !containsStr(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// runHead takes the session's lease (as a new holder: an admission left
// running becomes unknown) and executes its queued head as a turn, a note,
// a failure, or leaves it running.
func runHead(t *testing.T, s backend.Store, r *rand.Rand, sid string, now time.Time, check func(string, error)) {
	t.Helper()
	l, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: sid, Holder: fmt.Sprint("h", r.IntN(1000)), TTL: time.Second, Now: now})
	check("acquire", err)
	if err != nil {
		return
	}
	heads, err := s.ListAdmissions(ctxOf(t), sid, backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}, Limit: 1})
	check("head", err)
	sess, err := s.GetSession(ctxOf(t), sid, time.Time{})
	check("session", err)
	if len(heads) == 0 || err != nil {
		return
	}
	a, target := heads[0], sess.CurrentTranscript
	switch k := r.IntN(4); {
	case a.Kind == backend.KindAutomation && k < 2: // a note
		_, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: sid, AdmissionID: a.ID, Epoch: l.Epoch, Direct: true,
			Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: target,
			Messages: []backend.NewMessage{noteMessage(target, a)}, Now: now})
		check("note", err)
	default:
		c, err := s.Claim(ctxOf(t), backend.ClaimRequest{Session: sid, AdmissionID: a.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: target, Now: now})
		check("claim", err)
		if err != nil || k == 3 {
			return // left running: the next holder makes it unknown
		}
		req := backend.SettleRequest{Session: sid, AdmissionID: c.ID, Epoch: c.Epoch, Generation: c.Generation,
			Outcome: backend.OutcomeCompleted, Messages: turnMessages(target, c.Text(), "re: "+c.Text()), Now: now.Add(time.Millisecond)}
		if k == 2 {
			req.Outcome, req.Error, req.Messages = backend.OutcomeFailed, "handler exit 1: \x1b[1mboom", nil
		}
		_, err = s.Settle(ctxOf(t), req)
		check("settle", err)
	}
}
