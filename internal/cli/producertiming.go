package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/producerhost"
)

// addTimingFlag adds producers run's --timing.
func addTimingFlag(cmd *cobra.Command, o *producersRunOptions) {
	cmd.Flags().BoolVar(&o.Timing, "timing", false,
		"at exit, print to stderr where each plugin's run spent its time: rpc, outbox, store, other")
}

// printTiming prints one line per plugin that ran: the events it
// delivered, the run's time and its shares (see producerhost.Timing), e.g.
//
//	hermesq: producer delegation: timing: 10000 events admitted in 3.210s (3115/s), 40 polls: rpc 0.412s 12.8%, outbox 1.500s 46.7%, store 1.100s 34.3%, other 0.198s 6.2%
func printTiming(w io.Writer, t *producerhost.Timing) {
	for _, p := range t.Plugins() {
		fmt.Fprintf(w, "hermesq: producer %s: timing: %s\n", p.Name, p)
	}
}
