// Command hermesq-producer-delegation is the delegation producer plugin:
// it offers the results of delegated sub-tasks that `hermesq delegate done`
// recorded in its outbox. The ready results of one session (and target)
// are offered as one coalesced group with a part each, so a result whose
// acknowledgement was lost and is offered again next to a fresh one
// resolves to its existing admission while the fresh one is admitted alone.
// Identity of a result: ["async_delegation",<delegation id>,""].
//
// hermesq producers run starts it; run by hand it says it is a plugin.
package main

import (
	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

func main() {
	producer.Check(nil) // no settings of its own: nothing to refuse
	ob, err := producer.OpenOutbox(producer.StateDir(), producer.OutboxOptions{Coalesce: true})
	if err != nil {
		producer.Logger().Fatalf("delegation: %v", err)
	}
	plugin.Serve(ob)
}
