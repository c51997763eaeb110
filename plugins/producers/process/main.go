// Command hermesq-producer-process is the process producer plugin: it
// offers the completions that `hermesq proc run` (a supervised command) and
// `hermesq proc watch` (a running process) recorded in its outbox, one
// admission each. Identity of a completion:
// ["completion",<process id>,<started_at>], started_at written as Python's
// repr of a float; text "[finished] <command> (exit N)" and the output tail.
//
// hermesq producers run starts it; run by hand it says it is a plugin.
package main

import (
	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

func main() {
	producer.Check(nil) // no settings of its own: nothing to refuse
	ob, err := producer.OpenOutbox(producer.StateDir(), producer.OutboxOptions{})
	if err != nil {
		producer.Logger().Fatalf("process: %v", err)
	}
	plugin.Serve(ob)
}
