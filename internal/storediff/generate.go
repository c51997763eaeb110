package storediff

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Generate returns the sequence of n operations of seed.
func Generate(seed uint64, n int) []Op { return GenerateOnly(seed, n, nil) }

// GenerateOnly is Generate with the operations limited to kinds (all when
// empty), to look at a few closely.
func GenerateOnly(seed uint64, n int, kinds []string) []Op {
	w := weights
	if len(kinds) > 0 {
		w = nil
		for _, x := range weights {
			if slices.Contains(kinds, x.kind) {
				w = append(w, x)
			}
		}
		if len(w) == 0 {
			return nil
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ops := make([]Op, 0, n+2)
	// Most sequences start with their sessions open, so they go deep.
	if rng.IntN(4) != 0 {
		ops = append(ops, Op{Kind: OpOpen, S: 0, P: 0, R: -1})
	}
	if rng.IntN(3) == 0 {
		ops = append(ops, Op{Kind: OpOpen, S: 1, P: 1, R: -1})
	}
	for len(ops) < n {
		ops = append(ops, genOp(rng, w))
	}
	return ops
}

// weights of the kinds, most valuable first.
var weights = []weight{
	{OpAdmitHuman, 14}, {OpAdmitAuto, 14}, {OpClaim, 10}, {OpSettle, 9}, {OpSettleHead, 6},
	{OpSettleClaim, 6}, {OpCompact, 8}, {OpAcquire, 6}, {OpCancel, 4}, {OpResolve, 4},
	{OpSettleRun, 3}, {OpRequeue, 2}, {OpRelease, 2}, {OpSvcCompact, 3}, {OpClose, 3},
	{OpCompress, 2}, {OpSwitch, 2}, {OpReplay, 3}, {OpGrant, 2}, {OpRevoke, 1},
	{OpViewer, 2}, {OpUnview, 1}, {OpAdmitBad, 2}, {OpAdmitBatch, 3}, {OpSvcAdmit, 3},
	{OpOpen, 2}, {OpReimport, 1},
}

type weight struct {
	kind string
	w    int
}

func genOp(rng *rand.Rand, weights []weight) Op {
	total := 0
	for _, w := range weights {
		total += w.w
	}
	x := rng.IntN(total)
	kind := ""
	for _, w := range weights {
		if x < w.w {
			kind = w.kind
			break
		}
		x -= w.w
	}
	o := Op{Kind: kind, R: -1, S: pickSession(rng), A: -1}
	if rng.IntN(3) == 0 {
		o.Dt = rng.IntN(120)
	}
	if rng.IntN(20) == 0 {
		o.Dt = 3600 * (1 + rng.IntN(48))
	}
	switch kind {
	case OpOpen:
		o.P = rng.IntN(2)
	case OpAdmitHuman, OpSvcAdmit:
		o.P = pickPrincipal(rng)
		if rng.IntN(2) == 0 {
			o.R = rng.IntN(len(requestIDs))
		}
		o.X = texts[rng.IntN(len(texts))]
		o.Flag = rng.IntN(3) != 0 // create the session
		if kind == OpSvcAdmit {
			if rng.IntN(2) == 0 {
				o.Ids = pickIdentities(rng)
				o.Flag = rng.IntN(2) == 0
			}
			if rng.IntN(6) == 0 {
				o.X = ""
			}
		}
		if rng.IntN(6) == 0 {
			o.N = 1 // reopen
		}
	case OpAdmitAuto:
		o.P = pickPrincipal(rng)
		o.Ids = pickIdentities(rng)
		o.X = texts[rng.IntN(len(texts))]
		o.Flag = rng.IntN(2) == 0
		o.N = rng.IntN(3) // 0: no pin; 1: pinned to the current; 2: pinned to "t1"
	case OpAdmitBad:
		o.P = pickPrincipal(rng)
		o.N = rng.IntN(badVariants)
	case OpAdmitBatch:
		for range 1 + rng.IntN(3) {
			for {
				s := genOp(rng, []weight{{OpAdmitHuman, 3}, {OpAdmitAuto, 3}, {OpAdmitBad, 1}})
				if s.Kind == OpAdmitHuman || s.Kind == OpAdmitAuto || s.Kind == OpAdmitBad {
					s.Dt = 0
					o.Sub = append(o.Sub, s)
					break
				}
			}
		}
	case OpGrant:
		o.P = 1 + rng.IntN(3)
		o.N = rng.IntN(len(roles))
	case OpRevoke:
		o.P = 1 + rng.IntN(3)
	case OpAcquire:
		o.H = rng.IntN(2)
		// Mostly the session's owner, who may drain; sometimes another
		// principal, who may only with a grant (drainer or owner).
		o.P = -1
		if rng.IntN(4) == 0 {
			o.P = rng.IntN(len(principals))
		}
	case OpRelease:
		o.H = rng.IntN(2)
	case OpClaim:
		o.A = pickRef(rng)
		o.Flag = rng.IntN(8) == 0
		o.N = rng.IntN(2)
	case OpSettle:
		o.A = pickRef(rng)
		o.N = rng.IntN(len(outcomes))
		o.Flag = rng.IntN(8) == 0
	case OpSettleHead:
		o.Flag = rng.IntN(2) == 0
		o.N = rng.IntN(2)
		if rng.IntN(4) == 0 {
			o.X = transcript[rng.IntN(len(transcript))]
		}
	case OpSettleRun:
		o.N = 1 + rng.IntN(3)
		o.Flag = rng.IntN(2) == 0
	case OpSettleClaim:
		o.N = rng.IntN(len(outcomes))
		o.A = pickRef(rng)
	case OpResolve:
		o.A = pickRef(rng)
		o.N = rng.IntN(len(resolutions))
	case OpCancel:
		o.A = pickRef(rng)
	case OpViewer:
		o.N = rng.IntN(90)
	case OpUnview:
		o.V = rng.IntN(3)
	case OpClose:
		o.N = rng.IntN(len(closeReasons) + 1)
	case OpCompress, OpSwitch:
		o.X = transcript[rng.IntN(len(transcript))]
	case OpCompact:
		o.C = pickCutoff(rng)
		if rng.IntN(3) == 0 {
			o.N = 1 + rng.IntN(3)
		}
	case OpSvcCompact:
		o.Flag = rng.IntN(2) == 0
		o.C = Cutoff{Name: "older-than", Off: int64(pickOlderThan(rng))}
	case OpReplay:
		o.A = rng.IntN(6)
		o.Flag = rng.IntN(3) == 0
		o.P = pickPrincipal(rng)
	}
	return o
}

func pickSession(rng *rand.Rand) int {
	if rng.IntN(5) == 0 {
		return 1 + rng.IntN(2)
	}
	return 0
}

func pickPrincipal(rng *rand.Rand) int {
	if rng.IntN(4) == 0 {
		return rng.IntN(len(principals))
	}
	return 0
}

func pickIdentities(rng *rand.Rand) []int {
	n := 1 + rng.IntN(3)
	var out []int
	seen := map[int]bool{}
	for range n {
		x := rng.IntN(len(identities))
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// pickRef is mostly -1 (the admission the operation finds), else an
// admission by order of appearance.
func pickRef(rng *rand.Rand) int {
	if rng.IntN(3) == 0 {
		return rng.IntN(8)
	}
	return -1
}

func pickCutoff(rng *rand.Rand) Cutoff {
	switch rng.IntN(12) {
	case 0:
		return Cutoff{Name: "min-int64"}
	case 1:
		return Cutoff{Name: "-1ns"}
	case 2:
		return Cutoff{Name: "epoch"}
	case 3:
		return Cutoff{Name: "year1"}
	case 4:
		return Cutoff{Name: "year9999"}
	case 5:
		return Cutoff{Name: "max-int64"}
	case 6:
		return Cutoff{Name: "year1969"}
	case 7, 8, 9:
		// At, just before or just after a settle time: the strictness of
		// "settled before".
		return Cutoff{Name: "settled", A: rng.IntN(6), Off: []int64{0, -1, 1, -1e6, 1e6}[rng.IntN(5)]}
	default:
		return Cutoff{Name: "clock", Off: -int64(rng.IntN(600)) * int64(time.Second)}
	}
}

func pickOlderThan(rng *rand.Rand) time.Duration {
	switch rng.IntN(7) {
	case 0:
		return 0
	case 1:
		return -time.Second
	case 2:
		return math.MaxInt64
	case 3:
		return 70 * 365 * 24 * time.Hour // reaches before 1970 from 2031
	default:
		return time.Duration(1+rng.IntN(300)) * time.Second
	}
}

// drainerName names the principal an acquire asks for: P, or "owner"
// (-1) for the session's owner whoever it is.
func drainerName(p int) string {
	if p < 0 {
		return "owner"
	}
	return principals[p]
}
