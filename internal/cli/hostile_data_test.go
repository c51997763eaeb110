package cli

import (
	"fmt"
	"strings"
	"testing"
)

// Data, round two: inputs that used to be taken and damage or mislead,
// refused on both stores with the store left as it was.
func TestHostileCompactCutoff(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("admit", "s1", "--text", "one")
		e.ok("drain", "s1", "--", "true")
		e.ok("admit", "s1", "--text", "queued")
		checkRefusals(t, e, []refusal{
			{"compact older than 800000h", "", []string{"compact", "--older-than", "800000h"}, ExitUsage, "--older-than 800000h0m0s reaches before 1970-01-01"},
			{"compact older than 2562047h", "", []string{"compact", "--older-than", "2562047h"}, ExitUsage, "reaches before 1970-01-01"},
			{"compact one session older than 800000h", "", []string{"compact", "--session", "s1", "--older-than", "800000h"}, ExitUsage, "reaches before 1970-01-01"},
			{"compact dry run older than 800000h", "", []string{"compact", "--dry-run", "--older-than", "800000h"}, ExitUsage, "reaches before 1970-01-01"},
		})
		// A cutoff just after 1970 compacts nothing settled since.
		r := e.ok("compact", "--older-than", "490000h")
		contains(t, "stdout", r.out, "0")
		if n := len(decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s1", "--status", "done"))); n != 1 {
			t.Errorf("%d done admissions listed after compact --older-than 490000h, want 1", n)
		}
	})
}

// The lines of one admit --batch, made within a millisecond or two, get
// ids that sort in seq order (docs/contract.md §2: later ids sort after
// earlier ones).
func TestAdmitBatchIDsSortInSeqOrder(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		var in strings.Builder
		for i := range 300 {
			fmt.Fprintf(&in, `{"session":"s1","text":"line %d"}`+"\n", i)
		}
		r := e.runWith(in.String(), false, "-o", "jsonl", "admit", "--batch", "-")
		r.wantExit(t, 0)
		lines := decodeLines[admitOut](t, r)
		if len(lines) != 300 {
			t.Fatalf("%d results, want 300", len(lines))
		}
		for i := 1; i < len(lines); i++ {
			a, b := lines[i-1].Admission, lines[i].Admission
			if b.Seq <= a.Seq || b.ID <= a.ID {
				t.Fatalf("line %d: seq %d id %s after seq %d id %s: ids out of seq order", i+1, b.Seq, b.ID, a.Seq, a.ID)
			}
		}
	})
}
