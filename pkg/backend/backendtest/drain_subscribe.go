package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var drainSubscribeTests = []suiteTest{
	{name: "Subscribe", fn: testSubscribe},
}

func testSubscribe(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	ctx, cancel := contextWithCancel(t)
	ch, err := s.Subscribe(ctx)
	noErr(t, "subscribe", err)
	human(t, s, "s2", "wake up")
	waitFor(t, ch, "s2")
	_, err = s.AddViewer(ctxOf(t), "s1", time.Hour, time.Now())
	noErr(t, "add viewer", err)
	waitFor(t, ch, "s1")
	cancel()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("subscription channel still open 20s after its context ended")
		}
	}
}

// waitFor reads ch until it reports session, failing after 20 s.
func waitFor(t *testing.T, ch <-chan string, session string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case id, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed before reporting %s", session)
			}
			if id == session {
				return
			}
		case <-deadline:
			t.Fatalf("no change of session %s reported within 20s", session)
		}
	}
}
