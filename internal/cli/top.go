package cli

import (
	"context"
	"slices"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/top"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

func newTopCmd(f *Factory) *cobra.Command {
	var sortBy string
	cmd := &cobra.Command{
		Use:   "top [--sort session|depth|age|unknown]",
		Short: "A live view of every session's queue",
		Long: `Top shows every session on a full-screen terminal view, updated as the store
changes (change notifications: fsnotify on bbolt, pub/sub on Redis) and every
5 seconds for the ages: state, depth, age of the oldest queued admission,
the running admission and how long it has run, unknown admissions, the
drain lease holder and live viewers; below, each producer's outbox:
pending events, those waiting after a refusal of the store (with the
oldest one's age and the last reason), rejected, delivered and dropped.

Keys: up/down (k/j) select a session; enter opens its queue (esc goes
back); s cycles the sort order, or d depth, a oldest age, u unknown,
n name; r reads the store now; q or ctrl-c quits and restores the terminal.

Top needs a terminal; without one it exits 2. Its view is drawn by
hermesq-top, installed beside hermesq, which this command replaces itself
with (so that no other command loads a terminal library).`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			check := func() error {
				if !slices.Contains(top.Sorts, sortBy) {
					return backend.Errorf(backend.ErrInvalid, "top --sort %q: want session, depth, age or unknown", sortBy)
				}
				if !f.IO.IsStdoutTTY() {
					return backend.Errorf(backend.ErrInvalid, "top needs a terminal (use 'hermesq stats' in scripts)")
				}
				return nil
			}
			if f.Top == nil {
				if err := check(); err != nil {
					return err
				}
				return execSibling(TopBinary) // returns only on failure
			}
			return storeRun(f, check, func(_ *printer, st backend.Store, _ *Config) error {
				ctx, cancel := context.WithCancel(cmd.Context())
				defer cancel()
				changes, err := st.Subscribe(ctx)
				if err != nil {
					return err
				}
				return f.Top(ctx, top.Options{Service: &admission.Service{Store: st, Now: f.Now}, Changes: changes, Sort: sortBy,
					Producers: f.producerStats, In: f.IO.In, Out: f.IO.Out})
			})
		},
	}
	cmd.Flags().StringVar(&sortBy, "sort", "session", "sort by session, depth, age or unknown")
	_ = cmd.RegisterFlagCompletionFunc("sort", fixedCompletion(top.Sorts...))
	return cmd
}
