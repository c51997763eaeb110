package storediff

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Store is a named constructor of fresh, empty stores.
type Store struct {
	Name string
	New  func(t testing.TB) backend.Store
}

// Run applies ops to a fresh store of each kind and returns the traces.
// The reference model judges the same ops (its trace is the last).
func Run(t testing.TB, stores []Store, ops []Op) []Trace {
	out := make([]Trace, len(stores))
	for i, s := range stores {
		st := s.New(t)
		r := NewRunner(st)
		for _, o := range ops {
			out[i].Steps = append(out[i].Steps, r.Apply(o))
		}
		exp, err := r.Export()
		if err != nil {
			exp = []string{"export: " + ErrName(err)}
		}
		out[i].Export = exp
		// The export imported into a fresh store of the next kind gives
		// the same export back.
		next := stores[(i+1)%len(stores)]
		out[i].RoundTrip = roundTrip(t, st, next)
		_ = st.Close()
	}
	return out
}

// roundTrip imports st's export into a fresh store of kind to and returns
// "" when that store's export is the same, else what differs.
func roundTrip(t testing.TB, st backend.Store, to Store) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs, err := exportRecords(ctx, st)
	if err != nil {
		return "export: " + ErrName(err)
	}
	dst := to.New(t)
	defer func() { _ = dst.Close() }()
	if len(recs) > 0 {
		if _, err := importRecords(ctx, dst, recs); err != nil {
			return "import into " + to.Name + ": " + err.Error()
		}
	}
	back, err := exportRecords(ctx, dst)
	if err != nil {
		return "export of " + to.Name + ": " + ErrName(err)
	}
	plain := func(rs []backend.Record) []string {
		r := &Runner{names: map[string]string{}}
		out := make([]string, len(rs))
		for i, rec := range rs {
			out[i] = r.norm(rec)
		}
		return out
	}
	if d := cmp.Diff(plain(recs), plain(back)); d != "" {
		return "imported into " + to.Name + ", exported again (-before +after):\n" + d
	}
	return ""
}

// Failure is what a sequence did wrong: the first difference between two
// stores, or between the stores and the model.
type Failure struct {
	Step   int // index of the first step that differs; len(ops) for the export
	Detail string
}

// Compare returns the first difference between the traces (stores named
// by names), or nil when they agree, then the model's verdict.
func Compare(names []string, traces []Trace, ops []Op) *Failure {
	f, _ := CompareCount(names, traces, ops)
	return f
}

// CompareCount is Compare, and the number of steps the model judged.
func CompareCount(names []string, traces []Trace, ops []Op) (*Failure, int) {
	for i := 1; i < len(traces); i++ {
		a, b := traces[0], traces[i]
		for j := range a.Steps {
			if j >= len(b.Steps) {
				break
			}
			if d := cmp.Diff(a.Steps[j], b.Steps[j]); d != "" {
				return &Failure{Step: j, Detail: fmt.Sprintf("step %d: %s and %s differ (-%s +%s):\n%s",
					j, names[0], names[i], names[0], names[i], d)}, 0
			}
		}
		if d := cmp.Diff(a.Export, b.Export); d != "" {
			return &Failure{Step: len(a.Steps), Detail: fmt.Sprintf("final export: %s and %s differ (-%s +%s):\n%s",
				names[0], names[i], names[0], names[i], d)}, 0
		}
	}
	if len(traces) == 0 {
		return nil, 0
	}
	for i, tr := range traces {
		if tr.RoundTrip != "" {
			return &Failure{Step: len(ops), Detail: fmt.Sprintf("the export of %s: %s", names[i], tr.RoundTrip)}, 0
		}
	}
	f, judged := JudgeCount(ops, traces[0])
	if f != nil {
		f.Detail = fmt.Sprintf("the model disagrees with %s (the stores agree):\n%s", strings.Join(names, ", "), f.Detail)
	}
	return f, judged
}

// Shrink drops operations from ops while fails still holds, one chunk at
// a time from large chunks to single operations (delta debugging), and
// returns the indexes of ops kept.
func Shrink(ops []Op, fails func([]Op) bool) []int {
	keep := make([]int, len(ops))
	for i := range keep {
		keep[i] = i
	}
	pick := func(ix []int) []Op {
		out := make([]Op, len(ix))
		for i, x := range ix {
			out[i] = ops[x]
		}
		return out
	}
	for chunk := len(keep) / 2; chunk >= 1; chunk /= 2 {
		for start := 0; start < len(keep); {
			end := min(start+chunk, len(keep))
			try := append(append([]int(nil), keep[:start]...), keep[end:]...)
			if len(try) > 0 && fails(pick(try)) {
				keep = try
				continue
			}
			start = end
		}
	}
	return keep
}

// Pick returns the ops at the indexes keep.
func Pick(ops []Op, keep []int) []Op {
	out := make([]Op, len(keep))
	for i, x := range keep {
		out[i] = ops[x]
	}
	return out
}

// Listing is a sequence one op a line, numbered by its place in the
// generated sequence.
func Listing(ops []Op, keep []int) string {
	var b strings.Builder
	for i, o := range ops {
		n := i
		if keep != nil {
			n = keep[i]
		}
		fmt.Fprintf(&b, "  %3d  %s\n", n, o)
	}
	return b.String()
}
