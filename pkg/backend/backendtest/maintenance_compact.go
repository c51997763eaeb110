package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var maintenanceCompactTests = []suiteTest{
	{name: "CompactKeepsResolving", fn: testCompactKeepsResolving},
	{name: "CompactExportImport", fresh: testCompactExportImport},
	{name: "CompactCutoffs", fn: testCompactCutoffs},
	{name: "CompactCursor", fn: testCompactCursor},
}

// compactFixture: in s1, a human turn with a request id (settled at +2s),
// a note with two identities (+3s), a queued human input, a cancelled
// automation input (+1s), and one settled later (+1h).
func compactFixture(t *testing.T, s backend.Store) (turn, note, queued, cancelled, late backend.Admission) {
	t.Helper()
	openSession(t, s, "s1")
	h := admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("question")})
	noErr(t, "admit", h.Err)
	n := auto(t, s, "s1", "note text", "n1", "n2").Admission
	c := auto(t, s, "s1", "cancelled", "c1").Admission
	_, err := s.Cancel(ctxOf(t), c.ID, at(time.Second))
	noErr(t, "cancel", err)
	l := acquire(t, s, "s1", "A", T0)
	turn = settleTurn(t, s, claim(t, s, l, h.Admission.ID, at(time.Second)), "reply", at(2*time.Second))
	note, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: n.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", n)}, Now: at(3 * time.Second)})
	noErr(t, "note", err)
	lt := auto(t, s, "s1", "late", "l1").Admission
	late, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: lt.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", lt)}, Now: at(time.Hour)})
	noErr(t, "late note", err)
	queued = human(t, s, "s1", "still queued")
	cancelled, err = s.GetAdmission(ctxOf(t), c.ID)
	noErr(t, "get cancelled", err)
	return turn, note, queued, cancelled, late
}

// Compact turns done admissions settled before the cut into tombstones,
// atomically: they leave listings, keep resolving their identities, request
// ids and ids as duplicates (payload compared by digest), and nothing else
// changes; compacting again finds nothing.
func testCompactKeepsResolving(t *testing.T, s backend.Store) {
	turn, note, queued, cancelled, late := compactFixture(t, s)
	msgs := listMessages(t, s, "s1")

	// Limit bounds one call; seq order.
	res, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute), Limit: 1})
	noErr(t, "compact limit 1", err)
	diff(t, "compacted with limit 1", []string{turn.ID}, res.Compacted)
	res, err = s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact", err)
	diff(t, "compacted", []string{note.ID, cancelled.ID}, res.Compacted)
	res, err = s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact again", err)
	if len(res.Compacted) != 0 {
		t.Errorf("compacting again: %v, want nothing", res.Compacted)
	}
	_, err = s.Compact(ctxOf(t), backend.CompactRequest{Session: "nosuch", Before: at(time.Minute)})
	wantErr(t, "compact an unknown session", err, backend.ErrNotFound)

	var ids []string
	for _, a := range listAdmissions(t, s, "s1", backend.AdmissionFilter{}) {
		ids = append(ids, a.ID)
	}
	diff(t, "listed after compaction", []string{late.ID, queued.ID}, ids)
	diff(t, "messages after compaction", msgs, listMessages(t, s, "s1"))
	if sess := getSession(t, s, "s1"); sess.Queued != 1 {
		t.Errorf("depth %d after compaction, want 1", sess.Queued)
	}

	// A tombstone: every field but the payload.
	tomb := getAdmission(t, s, note.ID)
	want := note
	want.Payload, want.Compacted, want.PayloadSHA1 = nil, true, backend.PayloadDigest(note.Payload)
	diff(t, "tombstone", want, tomb)
	if got, err := s.FindIdentity(ctxOf(t), "s1", "n2"); err != nil || got.ID != note.ID || !got.Compacted {
		t.Errorf("find n2 after compaction: %+v, %v", got, err)
	}

	// Re-offers resolve to the tombstones as duplicates: nothing new.
	r := admit1(t, s, autoReq("s1", "note text", "n1"))
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != note.ID || !r.Admission.Compacted || r.PayloadDiffers {
		t.Errorf("re-offer n1: %+v", r)
	}
	r = admit1(t, s, autoReq("s1", "other text", "n2"))
	if r.Err != nil || r.Result != backend.ResultDuplicate || !r.PayloadDiffers {
		t.Errorf("re-offer n2 with another payload: %+v, want duplicate with payload_differs", r)
	}
	r = admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("question")})
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != turn.ID {
		t.Errorf("re-sent request id: %+v", r)
	}
	r = admit1(t, s, backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "rq", Payload: Payload("another")})
	wantErr(t, "request id reused with another payload after compaction", r.Err, backend.ErrConflict)
	r = admit1(t, s, backend.AdmitRequest{ID: cancelled.ID, Session: "s1", Kind: backend.KindAutomation, Producer: Producer,
		Principal: Owner, Identities: []string{"c1"}, Payload: Payload("cancelled")})
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != cancelled.ID {
		t.Errorf("re-sent admission id: %+v", r)
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 2 {
		t.Errorf("%d admissions listed after the re-offers, want 2", n)
	}
	if sess := getSession(t, s, "s1"); sess.NextSeq != late.Seq+2 {
		t.Errorf("next seq %d: a re-offer created an admission", sess.NextSeq)
	}
	// A tombstone is done: it cannot be cancelled or resolved.
	_, err = s.Cancel(ctxOf(t), note.ID, at(2*time.Hour))
	wantErr(t, "cancel a tombstone", err, backend.ErrConflict)
}

// Export writes tombstones as tombstone records; an import into a fresh
// store keeps them resolving, and importing them again is a no-op.
func testCompactExportImport(t *testing.T, newStore func(t *testing.T) backend.Store) {
	s := newStore(t)
	_, note, _, _, _ := compactFixture(t, s)
	_, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "s1", Before: at(time.Minute)})
	noErr(t, "compact", err)
	recs := export(t, s)
	var tombs []string
	for _, r := range recs {
		if r.Tombstone != nil {
			tombs = append(tombs, r.Tombstone.Admission.ID)
			if r.Tombstone.PayloadDigest == "" || r.Tombstone.Admission.Payload != nil {
				t.Errorf("tombstone record %+v", r.Tombstone)
			}
		}
	}
	if len(tombs) != 3 || !slices.Contains(tombs, note.ID) {
		t.Fatalf("exported tombstones %v, want 3 with %s", tombs, note.ID)
	}
	fresh := newStore(t)
	noErr(t, "import", importErr(t, fresh, recs))
	noErr(t, "import again", importErr(t, fresh, recs))
	diff(t, "export of the imported store", recs, export(t, fresh))
	r := admit1(t, fresh, autoReq("s1", "note text", "n2"))
	if r.Err != nil || r.Result != backend.ResultDuplicate || r.Admission.ID != note.ID || r.PayloadDiffers {
		t.Errorf("re-offer after import: %+v", r)
	}
	var bad backend.Tombstone
	for _, r := range recs {
		if r.Tombstone != nil {
			bad = *r.Tombstone
		}
	}
	bad.PayloadDigest = "not hex"
	other := newStore(t)
	err = importErr(t, other, []backend.Record{recs[0], {Tombstone: &bad}})
	wantErr(t, "import a tombstone with a bad digest", err, backend.ErrInvalid)
}

// cancelledAt admits one human input per time to session and cancels it
// at that time: done admissions settled at each, in seq order.
func cancelledAt(t *testing.T, s backend.Store, session string, times []time.Time) []backend.Admission {
	t.Helper()
	var out []backend.Admission
	for i, when := range times {
		a := human(t, s, session, fmt.Sprintf("input %d", i))
		c, err := s.Cancel(ctxOf(t), a.ID, when)
		noErr(t, "cancel", err)
		out = append(out, c)
	}
	return out
}

// Compact selects exactly the done admissions settled strictly before the
// cutoff, compared as instants to the nanosecond, for any cutoff: before
// 1970 (negative in nanoseconds), before or after every time an int64 of
// nanoseconds holds, the zero time, and random ones. Each store is held to
// time.Time.Before, so the stores are held to each other.
func testCompactCutoffs(t *testing.T, s backend.Store) {
	settled := []time.Time{
		time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), time.Unix(0, 0).UTC(), at(time.Second),
		at(1500 * time.Millisecond), at(time.Hour), at(24 * time.Hour), at(100 * 24 * time.Hour),
	}
	cutoffs := []time.Time{
		{}, time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Unix(0, math.MinInt64), time.Unix(0, math.MinInt64+1),
		time.Date(1734, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1938, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, -1), time.Unix(0, 1), time.Unix(0, math.MaxInt64), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for _, at := range settled {
		cutoffs = append(cutoffs, at.Add(-time.Nanosecond), at, at.Add(time.Nanosecond))
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	for range 20 {
		cutoffs = append(cutoffs, time.Unix(0, int64(rnd.Uint64())))
		cutoffs = append(cutoffs, at(time.Duration(rnd.Int64N(int64(200*24*time.Hour)))-50*24*time.Hour))
	}
	// In ascending order each cutoff meets the admissions the smaller ones
	// left; in descending order the first meets them all.
	slices.SortFunc(cutoffs, func(a, b time.Time) int { return a.Compare(b) })
	for _, order := range []string{"ascending", "descending"} {
		sid := "cut-" + order
		openSession(t, s, sid)
		adms := cancelledAt(t, s, sid, settled)
		human(t, s, sid, "queued, never compacted")
		left := slices.Clone(adms)
		for _, cut := range cutoffs {
			var want []string
			left = slices.DeleteFunc(left, func(a backend.Admission) bool {
				if a.SettledAt.Before(cut) {
					want = append(want, a.ID)
					return true
				}
				return false
			})
			res, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: sid, Before: cut})
			noErr(t, "compact", err)
			diff(t, fmt.Sprintf("%s: compacted before %s (%d ns)", order, cut.Format(time.RFC3339Nano), cut.UnixNano()), want, res.Compacted)
		}
		slices.Reverse(cutoffs)
	}
}

// Compact goes on from a cursor: a call examines only the admissions after
// seq After, at most Scan of them, and Next says where the next call
// starts (0 at the end), so a compaction in batches passes over the
// session once and never rescans what an earlier call examined.
func testCompactCursor(t *testing.T, s backend.Store) {
	for _, sid := range []string{"c1", "c2"} {
		openSession(t, s, sid)
	}
	var times []time.Time
	for range 10 {
		times = append(times, at(time.Second))
	}
	c1 := cancelledAt(t, s, "c1", times[:3])
	c1 = append(c1, human(t, s, "c1", "queued")) // seq 4: not done
	c1 = append(c1, cancelledAt(t, s, "c1", times[:6])...)
	cut := at(time.Minute)
	type step struct {
		after uint64
		ids   []string
		next  uint64
	}
	ids := func(as ...backend.Admission) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	after := uint64(0)
	for i, want := range []step{
		{0, ids(c1[0], c1[1], c1[2]), c1[2].Seq},
		{c1[2].Seq, ids(c1[4], c1[5]), c1[5].Seq},
		{c1[5].Seq, ids(c1[6], c1[7], c1[8]), c1[8].Seq},
		{c1[8].Seq, ids(c1[9]), 0},
	} {
		if after != want.after {
			t.Fatalf("call %d: next %d, want %d", i, after, want.after)
		}
		res, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "c1", Before: cut, After: after, Scan: 3})
		noErr(t, "compact", err)
		diff(t, fmt.Sprintf("call %d after seq %d: compacted", i, after), want.ids, res.Compacted)
		if res.Next != want.next {
			t.Errorf("call %d after seq %d: next %d, want %d", i, after, res.Next, want.next)
		}
		after = res.Next
	}

	// A call from a cursor never looks before it; Limit stops a call too.
	c2 := cancelledAt(t, s, "c2", times)
	res, err := s.Compact(ctxOf(t), backend.CompactRequest{Session: "c2", Before: cut, After: c2[5].Seq, Limit: 2})
	noErr(t, "compact c2 after seq 6", err)
	diff(t, "c2 after seq 6, limit 2", ids(c2[6], c2[7]), res.Compacted)
	if res.Next != c2[7].Seq {
		t.Errorf("c2 after seq 6, limit 2: next %d, want %d", res.Next, c2[7].Seq)
	}
	diff(t, "c2 listed", ids(append(c2[:6:6], c2[8:]...)...), ids(listAdmissions(t, s, "c2", backend.AdmissionFilter{})...))
	res, err = s.Compact(ctxOf(t), backend.CompactRequest{Session: "c2", Before: cut, After: c2[9].Seq})
	noErr(t, "compact c2 after its last seq", err)
	if len(res.Compacted) != 0 || res.Next != 0 {
		t.Errorf("compact after the last seq: %+v, want nothing, next 0", res)
	}
}
