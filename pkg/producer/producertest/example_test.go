package producertest_test

import (
	"context"
	"testing"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/producertest"
)

// A plugin's test checks its Producer (here an Outbox holding one event)
// over gRPC, as hermesq drives it.
func Example() {
	// In the plugin's _test.go file:
	TestProducer := func(t *testing.T) {
		ob, err := producer.OpenOutbox(t.TempDir(), producer.OutboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ob.Add(context.Background(), producer.Event{Session: "s1", Identity: `["x","1",""]`, Text: "done"}); err != nil {
			t.Fatal(err)
		}
		producertest.Run(t, ob)
	}
	_ = TestProducer
}

// A plugin's own binary, started as the host starts it with its
// configuration in HERMESQ_PRODUCER_CONFIG, checked the same way; the
// configuration must give it at least one event to offer.
func ExampleRunBinary() {
	TestBinary := func(t *testing.T) {
		producertest.RunBinary(t, "./hermesq-producer-watch", []byte(`{"watches":[{"name":"app","path":"/var/log/app.log","pattern":"ERROR","session":"s1","from_start":true}]}`))
	}
	_ = TestBinary
}
