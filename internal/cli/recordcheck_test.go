package cli

import (
	"strings"
	"testing"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/producer"
)

// TestProcRunTailCutToFit: a completion whose output tail would take it
// over the payload limit is recorded with its tail cut from the start to
// fit (proc run checked before the command started that the rest fits),
// never recorded too large for the store.
func TestProcRunTailCutToFit(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	t.Setenv("HERMESQ_PAYLOAD_LIMIT", "600")
	// 1,500 bytes of control characters: each is 6 bytes in JSON (\u0001).
	e.ok("proc", "run", "--session", "s1", "--", "sh", "-c", `i=0; while [ $i -lt 1500 ]; do printf '\001'; i=$((i+1)); done; echo; echo LAST`)
	es := decode[[]producer.Entry](t, e.ok("-o", "json", "producers", "outbox", "process"))
	if len(es) != 1 {
		t.Fatalf("%d events, want 1", len(es))
	}
	c, err := admission.Canonical(es[0].Payload, 600)
	if err != nil {
		t.Fatalf("the recorded completion does not fit the limit: %v", err)
	}
	if !strings.Contains(string(c), `LAST`) || !strings.Contains(string(c), `\u0001`) {
		t.Errorf("payload %s: want the end of the output, cut from its start", c)
	}
}
