package redis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/plugins/storage/redis"
)

// A compaction larger than one script call's step runs in several calls
// (so none holds the server long) and gives what one call would: every
// settled admission in seq order, the cursor where a scan or a limit
// stopped, 0 at the end.
func TestCompactInSteps(t *testing.T) {
	srv := redistest.Start(t)
	s := mustOpen(t, srv.FreshURL())
	ctx := context.Background()
	const n = 700
	settled := map[string][]backend.Admission{}
	for _, sid := range []string{"all", "scan", "limit"} {
		settled[sid] = settleNotes(t, s, sid, n)
	}
	cut := time.Now().Add(time.Hour)

	isHSet := func(name string) bool { return name == "hset" }
	calls, hsets := evalCalls(t, srv), commandCalls(t, srv, isHSet)
	res, err := s.Compact(ctx, backend.CompactRequest{Session: "all", Before: cut})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Compacted, admissionIDs(settled["all"])) || res.Next != 0 {
		t.Errorf("compact all: %d compacted, next %d; want %d, next 0", len(res.Compacted), res.Next, n)
	}
	calls, hsets = evalCalls(t, srv)-calls, commandCalls(t, srv, isHSet)-hsets
	if calls < 2 {
		t.Errorf("compacting %d admissions took %d script calls, want several", n, calls)
	}
	// Each call writes its tombstones in one HSET (two past 500 of them).
	if hsets > 2*calls {
		t.Errorf("compacting %d admissions in %d script calls ran %d HSETs, want at most two a call", n, calls, hsets)
	}

	// A scan over several steps stops where it was told, and goes on.
	as := settled["scan"]
	res, err = s.Compact(ctx, backend.CompactRequest{Session: "scan", Before: cut, Scan: 450})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Compacted, admissionIDs(as[:450])) || res.Next != as[449].Seq {
		t.Errorf("scan 450: %d compacted, next %d; want 450, next %d", len(res.Compacted), res.Next, as[449].Seq)
	}
	res, err = s.Compact(ctx, backend.CompactRequest{Session: "scan", Before: cut, After: res.Next, Scan: 450})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Compacted, admissionIDs(as[450:])) || res.Next != 0 {
		t.Errorf("scan 450 after 450: %d compacted, next %d; want %d, next 0", len(res.Compacted), res.Next, n-450)
	}

	// A limit over several steps.
	as = settled["limit"]
	res, err = s.Compact(ctx, backend.CompactRequest{Session: "limit", Before: cut, Limit: 333})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Compacted, admissionIDs(as[:333])) || res.Next != as[332].Seq {
		t.Errorf("limit 333: %d compacted, next %d; want 333, next %d", len(res.Compacted), res.Next, as[332].Seq)
	}
	// Tombstones are no longer listed.
	for sid, left := range map[string]int{"all": 0, "scan": 0, "limit": n - 333} {
		got, err := s.ListAdmissions(ctx, sid, backend.AdmissionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != left {
			t.Errorf("session %s: %d admissions listed after compaction, want %d", sid, len(got), left)
		}
	}
}

// One script call's step past a thousand admissions reads their records
// and writes their tombstones in slices (a thousand arguments each, what
// Lua's unpack is given): a step of 1,000 examines 1,001 (the next one is
// its cursor) and compacts the first 1,000; a step with no bound compacts
// the rest, 1,500 (two slices of records, three of tombstones).
func TestCompactStepOfAThousand(t *testing.T) {
	srv := redistest.Start(t)
	s := mustOpen(t, srv.FreshURL())
	ctx := context.Background()
	as := settleNotes(t, s, "wide", 2500)
	cut := time.Now().Add(time.Hour)
	next, ids, err := redis.CompactOnceForTest(ctx, s, "wide", cut, 0, 1000)
	if err != nil || !slices.Equal(ids, admissionIDs(as[:1000])) || next != as[999].Seq {
		t.Fatalf("step of 1000: %d compacted, next %d, %v; want 1000, next %d", len(ids), next, err, as[999].Seq)
	}
	next, ids, err = redis.CompactOnceForTest(ctx, s, "wide", cut, next, 0)
	if err != nil || !slices.Equal(ids, admissionIDs(as[1000:])) || next != 0 {
		t.Fatalf("the rest: %d compacted, next %d, %v; want 1500, next 0", len(ids), next, err)
	}
	if left, err := s.ListAdmissions(ctx, "wide", backend.AdmissionFilter{}); err != nil || len(left) != 0 {
		t.Fatalf("%d admissions listed after compaction, %v; want none", len(left), err)
	}
}

// admissionIDs is the ids of as, in order.
func admissionIDs(as []backend.Admission) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

// settleNotes admits n notes to a new session sid and drains them: n done
// admissions, returned in seq order.
func settleNotes(t *testing.T, s backend.Store, sid string, n int) []backend.Admission {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: sid, Owner: "u"}); err != nil {
		t.Fatal(err)
	}
	svc := &admission.Service{Store: s}
	var ins []admission.Input
	for i := 0; i < n; i++ {
		ins = append(ins, admission.Input{Session: sid, Producer: "p", Principal: "u",
			Identities: []string{fmt.Sprintf("done:%s:%d", sid, i)}, Text: "settled"})
	}
	if _, err := svc.AdmitBatch(ctx, ins); err != nil {
		t.Fatal(err)
	}
	rep, err := svc.Drain(ctx, sid, admission.DrainOptions{Principal: "u", NoExecuted: true})
	if err != nil || rep.Notes != n {
		t.Fatalf("drain %s: %d notes, %v; want %d", sid, rep.Notes, err, n)
	}
	as, err := s.ListAdmissions(ctx, sid, backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusDone}})
	if err != nil || len(as) != n {
		t.Fatalf("list %s: %d done, %v; want %d", sid, len(as), err, n)
	}
	return as
}

// evalCalls is how many EVALSHA and EVAL calls the server has run.
func evalCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	return commandCalls(t, srv, func(name string) bool { return strings.HasPrefix(name, "eval") })
}

// commandCalls is how many calls of the commands that match the server has
// run (INFO commandstats; the commands run inside scripts included).
func commandCalls(t *testing.T, srv *redistest.Server, match func(name string) bool) int {
	t.Helper()
	info, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, stats, _ := strings.Cut(rest, ":")
		if !match(name) {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				c, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("commandstats %q: %v", line, err)
				}
				total += c
			}
		}
	}
	return total
}
