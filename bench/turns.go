package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"time"
)

// figure7: a turn (one `hermesq drain` of many turns with handler `true`,
// per turn) against its floor: one exec of `true` plus one durable commit
// (a raw bbolt transaction putting one small record), both measured in
// this run; as information, the CPU the drainer process takes a turn
// against the CPU of `true` alone, the bare fdatasync cost, and an
// fdatasync after as many pages as a turn's commit writes, apart and
// adjacent (what the commit's scattered pages cost on this disk).
func figure7(e *env, sz sizes) ([]Result, error) {
	store := e.boltURL()
	if _, err := e.hq(store, nil, "session", "open", "t"); err != nil {
		return nil, err
	}
	if _, err := e.hq(store, humans("t", sz.Turns), "admit", "--batch", "-", "-o", "jsonl"); err != nil {
		return nil, err
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return nil, err
	}
	r, err := e.hq(store, nil, "drain", "t", "-o", "json", "--", truePath)
	if err != nil {
		return nil, err
	}
	var rep struct {
		Turns int `json:"turns"`
	}
	if err := json.Unmarshal(r.out, &rep); err != nil || rep.Turns != sz.Turns {
		return nil, fmt.Errorf("drain ran %d turns, want %d (%v)", rep.Turns, sz.Turns, err)
	}
	t0 := time.Now()
	var execCPU time.Duration
	for i := 0; i < sz.Turns; i++ {
		c := exec.Command(truePath)
		if err := c.Run(); err != nil {
			return nil, err
		}
		execCPU += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	execOne := time.Since(t0) / time.Duration(sz.Turns)
	commit, err := commitCost(e.fresh("commit")+".db", sz.Commits)
	if err != nil {
		return nil, err
	}
	bare, err := fsyncCost(e.fresh("fsync"), sz.Commits)
	if err != nil {
		return nil, err
	}
	var scattered [2]time.Duration
	for k, apart := range []bool{false, true} {
		if scattered[k], err = scatteredSyncCost(e.fresh("scatter"), sz.Commits, apart); err != nil {
			return nil, err
		}
	}
	turn := r.wall / time.Duration(sz.Turns)
	floor := fmt.Sprintf("floor (exec of true %.2f ms, mean of %d + one bbolt commit %.2f ms, median of %d)",
		ms(execOne), sz.Turns, ms(commit), sz.Commits)
	return []Result{
		withNote(mk("7", "a turn, handler true, bbolt", ms(turn), "ms", floor, ms(execOne+commit), "<= 1.5"),
			fmt.Sprintf("one drain of %d turns, per turn", sz.Turns)),
		withNote(mk("7", "CPU of the drainer process in a turn", ms(r.cpu/time.Duration(sz.Turns)), "ms",
			"CPU of one `true` (its own user and system time)", ms(execCPU/time.Duration(sz.Turns)), ""),
			fmt.Sprintf("the drain's own rusage over %d turns, per turn; its handler supervisor, which ends after it, is not counted", sz.Turns)),
		withNote(mk("7", "bare fdatasync (4 KiB write + fdatasync)", ms(bare), "ms", "", 0, ""),
			fmt.Sprintf("median of %d", sz.Commits)),
		withNote(mk("7", fmt.Sprintf("%d pages written apart + fdatasync (a turn's commit writes about as many)", scatterPages), ms(scattered[1]), "ms",
			fmt.Sprintf("%d adjacent pages + fdatasync", scatterPages), ms(scattered[0]), ""),
			fmt.Sprintf("median of %d each", sz.Commits)),
	}, nil
}
