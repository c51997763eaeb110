package producerhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// inProcess is a plugin served in the test's own process: the host's
// calls go straight to p.
type inProcess struct{ p producer.Producer }

func (c inProcess) Producer() producer.Producer { return c.p }
func (inProcess) Exited() bool                  { return false }
func (inProcess) Kill()                         {}

// noLimit is an outbox that coalesces a session's events whatever the
// payload limit, as a plugin unaware of it would.
type noLimit struct{ *producer.Outbox }

func (n noLimit) Poll(ctx context.Context, req producer.PollRequest) ([]producer.Offer, error) {
	req.PayloadLimit = 0
	return n.Outbox.Poll(ctx, req)
}

func testHost(t *testing.T, p producer.Producer, limit int) (*Host, backend.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := openStore(ctx, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, _, err := st.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "test", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	t.Cleanup(func() { t.Log(log.String()) })
	return &Host{
		Admission: &admission.Service{Store: st, MaxPayload: limit},
		Principal: "test",
		Config:    Config{StateDir: t.TempDir()},
		Once:      true,
		Stderr:    &log,
		Launch:    func(*exec.Cmd, LaunchOptions) (Client, error) { return inProcess{p}, nil },
	}, st
}

// A plugin that offers a group over the limit: the host splits it until
// every part goes in, and completes the claim.
func TestSplitGroupOverTheLimit(t *testing.T) {
	ob, err := producer.OpenOutbox(t.TempDir(), producer.OutboxOptions{Coalesce: true})
	if err != nil {
		t.Fatal(err)
	}
	var evs []producer.Event
	for i := range 40 {
		evs = append(evs, producer.Event{Session: "s1", Target: "s1", Identity: fmt.Sprintf("e%02d", i), Text: strings.Repeat("x", 1000)})
	}
	if _, err := ob.AddAll(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	h, st := testHost(t, noLimit{ob}, 10000)
	rep := h.Run(context.Background(), []Spec{{Name: "delegation", Path: "/nonexistent", Enabled: true}})
	if len(rep.Failures) > 0 || len(rep.Rejected) > 0 || len(rep.Waiting) > 0 {
		t.Fatalf("report %+v", rep)
	}
	es, err := ob.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.State != producer.StateDelivered {
			t.Errorf("%s: %s (%s), want delivered", e.Identity, e.State, e.Reason)
		}
	}
	as, err := st.ListAdmissions(context.Background(), "s1", backend.AdmissionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range as {
		n += len(a.Identities)
		if len(a.Payload) > 10000 {
			t.Errorf("admission of %d bytes", len(a.Payload))
		}
	}
	if n != 40 || len(as) < 4 {
		t.Fatalf("%d admissions holding %d identities, want the 40 in 4 or more", len(as), n)
	}
}

// ComposedSize, with which plugins pack their groups, is the size of the
// payload the store composes (backend.ComposeParts of the canonical parts).
func TestComposedSizeIsTheStoresSize(t *testing.T) {
	texts := []string{"plain", "quote \" and \\ backslash", "line\nbreak\ttab\x01ctl", "unicode é ✓ 😀", "<html> & \u2028",
		strings.Repeat("y", 5000)}
	for n := 1; n <= len(texts); n++ {
		var evs []producer.Event
		var parts []backend.Part
		for i, text := range texts[:n] {
			ev := producer.Event{Session: "s1", Identity: fmt.Sprintf(`["x","%d",""]`, i), Text: text}
			raw, _ := json.Marshal(map[string]string{"text": text})
			if i%2 == 1 { // a payload event, with another member
				raw, _ = json.Marshal(map[string]any{"text": text, "exit": i})
				ev.Text, ev.Payload = "", raw
			}
			canon, err := admission.Canonical(raw, 0)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			parts = append(parts, backend.Part{Identity: ev.Identity, Payload: canon})
		}
		if got, want := producer.ComposedSize(evs), len(backend.ComposeParts(parts)); got != want {
			t.Errorf("%d events: ComposedSize %d, the store composes %d", n, got, want)
		}
	}
}

// slowPoll is a plugin whose polls return only when their deadline ends
// them.
type slowPoll struct{ *producer.Outbox }

func (slowPoll) Poll(ctx context.Context, _ producer.PollRequest) ([]producer.Offer, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A plugin that misses its poll deadline is started again, at most
// OnceStarts times with Once, and reported failed, named by the deadline's
// setting.
func TestPollDeadline(t *testing.T) {
	ob, err := producer.OpenOutbox(t.TempDir(), producer.OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := testHost(t, slowPoll{ob}, 0)
	starts := 0
	h.Launch = func(*exec.Cmd, LaunchOptions) (Client, error) { starts++; return inProcess{slowPoll{ob}}, nil }
	h.Config.PollDeadline = 50 * time.Millisecond
	rep := h.Run(context.Background(), []Spec{{Name: "slow", Path: "/nonexistent", Enabled: true}})
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0].Err.Error(), "poll did not return within 50ms (producer_poll_deadline)") {
		t.Fatalf("failures %+v", rep.Failures)
	}
	if starts != OnceStarts {
		t.Fatalf("%d starts, want %d", starts, OnceStarts)
	}
}
