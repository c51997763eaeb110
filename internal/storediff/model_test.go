package storediff

import (
	"strings"
	"testing"
)

// The model judges on its own: a trace whose compaction took the wrong
// admissions, or kept them at a cutoff before 1970 where it must take
// none, fails it, though no store is there to disagree.
func TestModelJudges(t *testing.T) {
	ops := []Op{
		{Kind: OpOpen, S: 0, P: 0, R: -1, A: -1},
		{Kind: OpAdmitHuman, S: 0, P: 0, R: -1, A: -1, X: "hi"},
		{Kind: OpCompact, S: 0, A: -1, R: -1, C: Cutoff{Name: "min-int64"}},
	}
	adm := `[{"Admission":{"id":"id0","seq":1,"session":"s1","status":"done","outcome":"completed","settled_at":"2031-03-04T05:06:07Z","kind":"human","principal":"alice","payload":{"text":"hi"}},"Result":"admitted"}]`
	state := `{"Admissions":["1:id0:done:completed"],"CurrentTranscript":"s1","NextSeq":2,"Owner":"alice"}`
	trace := func(compact string) Trace {
		return Trace{Steps: []Step{
			{Reply: `{"created":true,"session":{"id":"s1","owner":"alice"}}`, State: `{"CurrentTranscript":"s1","NextSeq":1,"Owner":"alice"}`},
			{Reply: adm, State: state},
			{Reply: compact, State: state},
		}}
	}
	if f := Judge(ops, trace(`{}`)); f != nil {
		t.Fatalf("nothing compacted before 1970: the model disagrees: %s", f.Detail)
	}
	f := Judge(ops, trace(`{"Compacted":["id0"]}`))
	if f == nil || f.Step != 2 {
		t.Fatalf("a compaction before 1970 that took an admission passed the model: %+v", f)
	}
	ops[2].C = Cutoff{Name: "year9999"}
	if f := Judge(ops, trace(`{}`)); f == nil {
		t.Fatal("a compaction at year 9999 that took nothing passed the model")
	}
	if f := Judge(ops, trace(`{"Compacted":["id0"]}`)); f != nil {
		t.Fatalf("a compaction at year 9999 that took the done admission: the model disagrees: %s", f.Detail)
	}
	// A second admission with the same identity is a duplicate, not new.
	auto := Op{Kind: OpAdmitAuto, S: 0, P: 0, R: -1, A: -1, X: "e", Ids: []int{0}}
	ops = []Op{ops[0], auto, auto}
	first := `[{"Admission":{"id":"id0","seq":1,"session":"s1","status":"queued","kind":"automation","principal":"alice","identities":["e1"],"payload":{"text":"e"}},"Result":"admitted"}]`
	st := `{"Admissions":["1:id0:queued:"],"CurrentTranscript":"s1","NextSeq":2,"Owner":"alice"}`
	tr := Trace{Steps: []Step{
		{Reply: `{"created":true,"session":{"id":"s1","owner":"alice"}}`, State: `{"CurrentTranscript":"s1","NextSeq":1,"Owner":"alice"}`},
		{Reply: first, State: st},
		{Reply: strings.Replace(strings.Replace(first, "id0", "id1", 1), `"seq":1`, `"seq":2`, 1), State: st},
	}}
	if f := Judge(ops, tr); f == nil || f.Step != 2 {
		t.Fatalf("an identity admitted twice passed the model: %+v", f)
	}
}

// Shrink keeps only what the failure needs.
func TestShrink(t *testing.T) {
	ops := Generate(7, 40)
	ops[11].Kind, ops[29].Kind = "needle-a", "needle-b"
	fails := func(o []Op) bool {
		a, b := false, false
		for _, x := range o {
			a = a || x.Kind == "needle-a"
			b = b || x.Kind == "needle-b"
		}
		return a && b
	}
	if keep := Shrink(ops, fails); len(keep) != 2 || keep[0] != 11 || keep[1] != 29 {
		t.Fatalf("shrunk to %v, want [11 29]", keep)
	}
}
