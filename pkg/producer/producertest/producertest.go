// Package producertest checks a producer plugin's Producer the way hermesq
// drives it: over go-plugin's gRPC transport, in process (Run, Conn), or as
// the plugin's own binary started the way the host starts it, with its
// configuration in HERMESQ_PRODUCER_CONFIG (RunBinary, StartBinary):
//
//	func TestProducer(t *testing.T) {
//		ob, err := producer.OpenOutbox(t.TempDir(), producer.OutboxOptions{})
//		if err != nil {
//			t.Fatal(err)
//		}
//		if _, err := ob.Add(context.Background(), producer.Event{Session: "s1", Identity: `["x","1",""]`, Text: "done"}); err != nil {
//			t.Fatal(err)
//		}
//		producertest.Run(t, ob)
//	}
//
// (This is the package's Example, compiled with its tests.)
package producertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"unicode/utf8"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

// Conn serves impl over go-plugin's in-process gRPC test connection and
// returns the host's side of it: a Producer whose calls go over gRPC. The
// connection is closed when the test ends.
func Conn(t testing.TB, impl producer.Producer) producer.Producer {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, plugin.Set(impl))
	// Closing the client asks the server to shut down (go-plugin's
	// controller), which stops it.
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(plugin.Name)
	if err != nil {
		t.Fatalf("producertest: dispense: %v", err)
	}
	p, ok := raw.(producer.Producer)
	if !ok {
		t.Fatalf("producertest: dispensed %T, not a producer.Producer", raw)
	}
	return p
}

// Run checks impl's contract over gRPC. impl must hold at least one ready
// event and nothing else may poll it during the test; Run delivers every
// event it holds. It checks that:
//   - every offer names a session, a claim unique among the offers, and
//     identities (at most 1024 bytes of UTF-8, none repeated) with either
//     one text or payload for the group, or a text or payload per part;
//   - Poll never offers more events than max;
//   - retry makes the events ready again at its not-before time (offered
//     by a later poll) and complete delivers them (never offered again);
//   - settling a claim twice, or a claim never issued, fails.
func Run(t *testing.T, impl producer.Producer) {
	t.Helper()
	check(t, Conn(t, impl))
}

// check is Run's checks on p, a producer reached over gRPC.
func check(t *testing.T, p producer.Producer) {
	t.Helper()
	ctx := context.Background()

	first, err := p.Poll(ctx, producer.PollRequest{Max: 1})
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(first) != 1 {
		t.Fatalf("poll(max 1) with events ready returned %d offers, want 1", len(first))
	}
	checkOffers(t, first, 1)
	ids := first[0].IdentityList()

	for round := range 2 {
		a := producer.Retry
		claim := first[0].Claim
		if err := p.Settle(ctx, claim, producer.Settlement{Action: a, Reason: fmt.Sprintf("producertest %d", round)}); err != nil {
			t.Fatalf("settle %s: %v", a, err)
		}
		if err := p.Settle(ctx, claim, producer.Settlement{Action: producer.Complete}); !errors.Is(err, producer.ErrUnknownClaim) {
			t.Fatalf("settle of a claim already settled with %s: got %v, want ErrUnknownClaim", a, err)
		}
		again := pollAll(t, p)
		found := -1
		for i, o := range again {
			if o.Session == first[0].Session && containsAll(o.IdentityList(), ids) {
				found = i
			}
		}
		if found < 0 {
			t.Fatalf("after %s, the events %q were not offered again", a, ids)
		}
		// A coalescing producer may offer them with other ready events.
		first = []producer.Offer{again[found]}
		ids = first[0].IdentityList()
		for i, o := range again {
			if i != found {
				if err := p.Settle(ctx, o.Claim, producer.Settlement{Action: producer.Retry, Reason: "producertest"}); err != nil {
					t.Fatalf("settle retry: %v", err)
				}
			}
		}
	}

	if err := p.Settle(ctx, first[0].Claim, producer.Settlement{Action: producer.Complete}); err != nil {
		t.Fatalf("settle complete: %v", err)
	}
	for {
		offers := pollAll(t, p)
		if len(offers) == 0 {
			break
		}
		for _, o := range offers {
			for _, id := range o.IdentityList() {
				if slices.Contains(ids, id) && o.Session == first[0].Session {
					t.Fatalf("event %s was offered again after complete", id)
				}
			}
			if err := p.Settle(ctx, o.Claim, producer.Settlement{Action: producer.Complete}); err != nil {
				t.Fatalf("settle complete: %v", err)
			}
		}
	}
	if err := p.Settle(ctx, "producertest-never-issued", producer.Settlement{Action: producer.Complete}); !errors.Is(err, producer.ErrUnknownClaim) {
		t.Fatalf("settle of a claim never issued: got %v, want ErrUnknownClaim", err)
	}
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// pollAll polls with a large max and checks the offers.
func pollAll(t *testing.T, p producer.Producer) []producer.Offer {
	t.Helper()
	const max = 1000
	offers, err := p.Poll(context.Background(), producer.PollRequest{Max: max})
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	checkOffers(t, offers, max)
	return offers
}

func checkOffers(t *testing.T, offers []producer.Offer, max int) {
	t.Helper()
	claims := map[string]bool{}
	n := 0
	for i, o := range offers {
		if o.Session == "" {
			t.Fatalf("offer %d has no session", i)
		}
		if o.Claim == "" || claims[o.Claim] {
			t.Fatalf("offer %d: claim %q is empty or not unique", i, o.Claim)
		}
		claims[o.Claim] = true
		ids := o.IdentityList()
		if len(ids) == 0 {
			t.Fatalf("offer %d has no identities", i)
		}
		n += len(ids)
		seen := map[string]bool{}
		for _, id := range ids {
			if id == "" || len(id) > 1024 || !utf8.ValidString(id) || seen[id] {
				t.Fatalf("offer %d: identity %q is empty, longer than 1024 bytes, not utf-8 or repeated", i, id)
			}
			seen[id] = true
		}
		if len(o.Parts) > 0 {
			if len(o.Identities) > 0 || o.Text != "" || len(o.Payload) > 0 {
				t.Fatalf("offer %d has parts and also group identities, text or payload", i)
			}
			for _, part := range o.Parts {
				if (part.Text == "") == (len(part.Payload) == 0) {
					t.Fatalf("offer %d: part %s needs exactly one of text and payload", i, part.Identity)
				}
			}
		} else if (o.Text == "") == (len(o.Payload) == 0) {
			t.Fatalf("offer %d needs exactly one of text and payload", i)
		}
	}
	if n > max {
		t.Fatalf("poll(max %d) offered %d events", max, n)
	}
}
