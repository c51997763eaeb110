// Command bench measures hermesq side by side with the stores it runs on and
// with asynq, in one run on one machine, and prints each figure with its
// reference and the ratio the project targets.
//
//	cd bench && go run . -quick          # CI size: about a minute
//	cd bench && go run . -json out.json  # full size: a few minutes
//	cd bench && go run . -only 7,9       # some figures only
//
// Every row names its floor or reference, measured in the same run, the
// target the project sets for the ratio, and whether it is met; a row
// without a target is information.
//
// It builds the hermesq binary, a hello-world Go binary and the CLIs of
// cmd/, and for figure 10 hermesq-producers and the delegation plugin;
// starts its own redis-servers on free loopback ports in a temporary
// directory (one with appendfsync everysec, one with appendfsync always);
// and removes everything it made when it ends.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"
)

// sizes are how much work each figure does.
type sizes struct {
	Admits      int // in-process single admits (figures 1, 4)
	Batch       int // NDJSON lines of one admit --batch (figure 2, 4)
	Execs       int // process runs for a median (figure 3)
	Notes       int // queued notes drained (figure 5)
	DepthSmall  int // queue depth of the shallow case (figure 6)
	DepthBig    int // queue depth of the deep case (figure 6)
	DepthProbe  int // admits and drains measured at each depth (figure 6)
	Turns       int // turns drained with handler true (figure 7)
	Commits     int // raw bbolt commits and bare fdatasyncs for a median (figure 7)
	FsyncWindow time.Duration
	// CompactSmall and CompactBig are the settled admissions compacted at
	// the small and the large size (figure 9).
	CompactSmall, CompactBig int
	Results                  int // delegation results through the plugin (figure 10)
}

var (
	quickSizes = sizes{Admits: 4000, Batch: 10000, Execs: 20, Notes: 5000, DepthSmall: 1000, DepthBig: 20000,
		DepthProbe: 500, Turns: 100, Commits: 50, FsyncWindow: 500 * time.Millisecond,
		CompactSmall: 1000, CompactBig: 10000, Results: 2000}
	fullSizes = sizes{Admits: 50000, Batch: 100000, Execs: 200, Notes: 100000, DepthSmall: 1000, DepthBig: 1000000,
		DepthProbe: 2000, Turns: 1000, Commits: 500, FsyncWindow: 2 * time.Second,
		CompactSmall: 100000, CompactBig: 1000000, Results: 10000}
)

// Result is one figure of the run.
type Result struct {
	Figure    string  `json:"figure"`    // target number of the issue ("1", "4a", …)
	Name      string  `json:"name"`      // what was measured
	Value     float64 `json:"value"`     // hermesq's figure
	Unit      string  `json:"unit"`      // of Value and RefValue
	Ref       string  `json:"ref"`       // the reference measured in the same run
	RefValue  float64 `json:"ref_value"` // its figure
	Ratio     float64 `json:"ratio"`     // Value / RefValue
	Target    string  `json:"target"`    // ">= 0.8", "<= 2.0", "" when none
	Met       *bool   `json:"met,omitempty"`
	Verdict   string  `json:"verdict"` // "met", "NO", or "info" for a row without a target
	Note      string  `json:"note,omitempty"`
	targetCmp string
	targetVal float64
}

// Report is the JSON the run writes.
type Report struct {
	Mode    string    `json:"mode"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Machine Machine   `json:"machine"`
	Results []Result  `json:"results"`
}

// Machine says where the figures come from.
type Machine struct {
	CPUs    int    `json:"cpus"`
	CPU     string `json:"cpu"`
	Kernel  string `json:"kernel"`
	Go      string `json:"go"`
	Redis   string `json:"redis"`
	TempDir string `json:"temp_dir"`
}

func main() {
	quick := flag.Bool("quick", false, "CI size: every figure, small counts (under 2 minutes)")
	jsonOut := flag.String("json", "bench-results.json", "write the results as JSON to this file (\"\" for none)")
	repo := flag.String("repo", "..", "the hermesq repository to build")
	only := flag.String("only", "", "comma-separated figure numbers to run (default all)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file (the figures measured in process: 1, 4, 6, 8)")
	flag.Parse()

	sz, mode := fullSizes, "full"
	if *quick {
		sz, mode = quickSizes, "quick"
	}
	start := time.Now()
	e, err := newEnv(*repo)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: error: %v\n", err)
		os.Exit(1)
	}
	// os.Exit skips deferred calls: every exit below closes the run first
	// (its redis-servers, its temporary folder).
	defer e.close()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: error: cpu profile: %v\n", err)
			e.close()
			os.Exit(1)
		}
	}

	rep := Report{Mode: mode, Started: start.UTC(), Machine: e.machine()}
	figures := []struct {
		n  string
		fn func(*env, sizes) ([]Result, error)
	}{
		{"1", figure1}, {"2", figure2}, {"3", figure3}, {"4", figure4},
		{"5", figure5}, {"6", figure6}, {"7", figure7}, {"8", figure8},
		{"9", figure9}, {"10", figure10},
	}
	want := map[string]bool{}
	for _, f := range strings.Split(*only, ",") {
		if f != "" {
			want[f] = true
		}
	}
	failed := false
	for _, f := range figures {
		if len(want) > 0 && !want[f.n] {
			continue
		}
		t0 := time.Now()
		rs, err := f.fn(e, sz)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: figure %s: %v\n", f.n, err)
			failed = true
			continue
		}
		for i := range rs {
			rs[i].judge()
		}
		rep.Results = append(rep.Results, rs...)
		fmt.Fprintf(os.Stderr, "bench: figure %s done in %.1fs\n", f.n, time.Since(t0).Seconds())
		e.endFigure()
	}
	pprof.StopCPUProfile() // a no-op without -cpuprofile
	rep.Seconds = time.Since(start).Seconds()
	printTable(os.Stdout, rep)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "bench: error: %v\n", err)
			e.close()
			os.Exit(1)
		}
		abs, _ := filepath.Abs(*jsonOut)
		fmt.Fprintf(os.Stderr, "bench: results written to %s\n", abs)
	}
	if failed {
		e.close()
		os.Exit(1)
	}
}

// rate is a result where more is better: ratio = value/ref.
func rate(fig, name string, v float64, ref string, rv float64, target string) Result {
	return mk(fig, name, v, "/s", ref, rv, target)
}

func mk(fig, name string, v float64, unit, ref string, rv float64, target string) Result {
	r := Result{Figure: fig, Name: name, Value: v, Unit: unit, Ref: ref, RefValue: rv, Target: target}
	if rv != 0 {
		r.Ratio = v / rv
	}
	if target != "" {
		var cmp string
		var x float64
		if _, err := fmt.Sscanf(target, "%s %g", &cmp, &x); err == nil {
			r.targetCmp, r.targetVal = cmp, x
		}
	}
	return r
}

func (r *Result) judge() {
	r.Verdict = "info"
	if r.targetCmp == "" || r.RefValue == 0 {
		return
	}
	var ok bool
	switch r.targetCmp {
	case ">=":
		ok = r.Ratio >= r.targetVal
	case "<=":
		ok = r.Ratio <= r.targetVal
	default:
		return
	}
	r.Met = &ok
	r.Verdict = map[bool]string{true: "met", false: "NO"}[ok]
}

func printTable(w0 *os.File, rep Report) {
	m := rep.Machine
	fmt.Fprintf(w0, "hermesq bench (%s) — %d CPUs, %s, %s, %s, %s; %.0fs\n\n",
		rep.Mode, m.CPUs, m.CPU, m.Kernel, m.Go, m.Redis, rep.Seconds)
	w := tabwriter.NewWriter(w0, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "#\tfigure\thermesq\treference\tratio\ttarget\tmet")
	for _, r := range rep.Results {
		met, target := r.Verdict, r.Target
		if met == "met" {
			met = "yes"
		}
		if target == "" {
			target = "-"
		}
		ratio := ""
		if r.RefValue != 0 {
			ratio = fmt.Sprintf("%.2f×", r.Ratio)
		}
		ref := r.Ref
		if ref == "" {
			ref = "-"
		}
		if r.RefValue != 0 {
			ref = fmt.Sprintf("%s %s", num(r.RefValue, r.Unit), r.Ref)
		}
		name := r.Name
		if r.Note != "" {
			name += " (" + r.Note + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Figure, name, num(r.Value, r.Unit), ref, ratio, target, met)
	}
	_ = w.Flush()
}

func num(v float64, unit string) string {
	switch unit {
	case "":
		if v == 0 {
			return "-"
		}
	case "/s":
		return fmt.Sprintf("%.0f/s", v)
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "µs":
		return fmt.Sprintf("%.1f µs", v)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case "×":
		return fmt.Sprintf("%.2f×", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}
