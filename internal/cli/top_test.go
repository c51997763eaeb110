package cli

import "testing"

// top needs a terminal and a known sort order: exit 2 otherwise, before
// the store is opened.
func TestTopRefusesWithoutTerminal(t *testing.T) {
	e := newEnv(t)
	e.run("top").wantExit(t, ExitUsage)
	e.runWith("", true, "top", "--sort", "bogus").wantExit(t, ExitUsage)
}
