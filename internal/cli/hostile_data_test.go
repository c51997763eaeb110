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

// An import that would plant a loop in a lineage is refused whole (exit
// 2, naming the chain), and one whose later record conflicts with the
// store (a stale copy of a session the store holds) is refused before its
// first write (exit 4): the store as it was, on both stores.
func TestHostileImportLoopsAndLateConflicts(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("admit", "old", "--text", "old input")
		stale := e.export()
		e.ok("drain", "old", "--", "true") // the epoch goes up: the copy is stale

		sub := func(line, old, new string) string {
			if !strings.Contains(line, old) {
				t.Fatalf("template has no %q", old)
			}
			return strings.Replace(line, old, new, 1)
		}
		x1 := sub(sub(impSession, `"id":"n1"`, `"id":"x"`), `"current_transcript":"n1"`, `"current_transcript":"X1"`)
		xt := func(id, parent string) string {
			return sub(sub(sub(impTranscript, `"id":"n1"`, `"id":"`+id+`"`), `"session":"n1"`, `"session":"x"`),
				`"parent":null`, `"parent":"`+parent+`"`)
		}
		other := newEnv(t)
		other.ok("admit", "n1", "--text", "new input")
		newSession := other.export()
		if n := strings.Count(newSession, "\n"); n != 3 {
			t.Fatalf("the new session exports %d records, want 3:\n%s", n, newSession)
		}
		checkRefusals(t, e, []refusal{
			{"import a transcript its own parent", impFile(impSession, sub(impTranscript, `"parent":null`, `"parent":"n1"`)),
				[]string{"import"}, ExitUsage, "line 2: transcript n1: its own parent"},
			{"import a transcript its own child", impFile(impSession, sub(impTranscript, `"child":null`, `"child":"n1"`)),
				[]string{"import"}, ExitUsage, "line 2: transcript n1: its own child"},
			{"import two transcripts each the other's parent", impFile(x1, xt("X1", "X1c"), xt("X1c", "X1")),
				[]string{"import"}, ExitUsage, "line 2: transcript X1: the lineage loops: X1 → X1c → X1"},
			{"import a new session then a stale copy of a stored one", newSession + stale,
				[]string{"import"}, ExitConflict, "import: line 4: "},
		})
	})
}

// Importing the same file twice: the second says nothing was written and
// how many records were there already.
func TestImportTwiceSaysNothingWritten(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		other := newEnv(t)
		other.ok("admit", "n1", "--text", "one")
		other.ok("admit", "n1", "--text", "two")
		file := other.export()
		r := e.runWith(file, false, "import").wantExit(t, 0)
		if want := "imported 4 records, 0 already there\n"; r.out != want {
			t.Errorf("first import: %q, want %q", r.out, want)
		}
		r = e.runWith(file, false, "import").wantExit(t, 0)
		if want := "imported 0 records, 4 already there\n"; r.out != want {
			t.Errorf("second import: %q, want %q", r.out, want)
		}
		if got := decode[map[string]int](t, e.runWith(file, false, "-o", "json", "import")); got["imported"] != 0 || got["present"] != 4 {
			t.Errorf("third import, json: %v, want imported 0, present 4", got)
		}
	})
}
