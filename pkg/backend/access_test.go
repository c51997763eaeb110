package backend

import (
	"encoding/json"
	"testing"
)

// Permits is the one rule of who may do what on a session.
func TestPermits(t *testing.T) {
	grants := []Grant{
		{Principal: "rita", Role: RoleReader},
		{Principal: "will", Role: RoleWriter},
		{Principal: "wanda", Role: RoleWriter, Producers: []string{"watch"}},
		{Principal: "otto", Role: RoleOwner},
		{Principal: "dora", Role: RoleDrainer},
		{Principal: "eve", Role: "bogus"},
	}
	type want struct{ inspect, human, watch, process, operate, drain bool }
	for p, w := range map[string]want{
		"alice":   {true, true, true, true, true, true}, // the owner
		"otto":    {true, true, true, true, true, true},
		"dora":    {true, false, false, false, false, true},
		"wanda":   {true, true, true, false, false, false},
		"will":    {true, true, false, false, false, false},
		"rita":    {true, false, false, false, false, false},
		"eve":     {false, false, false, false, false, false}, // a role no binary gives
		"mallory": {false, false, false, false, false, false},
		"":        {false, false, false, false, false, false},
	} {
		got := want{
			Permits("alice", grants, p, ActInspect, ""),
			Permits("alice", grants, p, ActAdmitHuman, ""),
			Permits("alice", grants, p, ActAdmitAutomation, "watch"),
			Permits("alice", grants, p, ActAdmitAutomation, "process"),
			Permits("alice", grants, p, ActOperate, ""),
			Permits("alice", grants, p, ActDrain, ""),
		}
		if got != w {
			t.Errorf("%q: got %+v, want %+v", p, got, w)
		}
	}
}

// A grant written before roles (a bare principal) reads as a writer.
func TestGrantOldForm(t *testing.T) {
	var gs []Grant
	if err := json.Unmarshal([]byte(`["bob",{"principal":"rita","role":"reader"}]`), &gs); err != nil {
		t.Fatal(err)
	}
	if len(gs) != 2 || gs[0].Principal != "bob" || gs[0].Role != RoleWriter || gs[1].Role != RoleReader {
		t.Fatalf("%+v", gs)
	}
}
