package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// Commands that act on one admission by id: show, find, resolve, cancel.

func newShowCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:               "show ADMISSION",
		Short:             "Show one admission",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAdmissionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admissionRun(f, args[0], backend.ActInspect, nil, func(p *printer, st backend.Store) error {
				a, err := st.GetAdmission(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return printAdmission(p, a)
			})
		},
	}
}

func newFindCmd(f *Factory) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:               "find IDENTITY [--session S]",
		Short:             "Find the admission holding an identity",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error {
				if err := backend.ValidateToken("identity", args[0]); err != nil {
					return err
				}
				if session != "" {
					return backend.ValidateID("session", session)
				}
				return nil
			}
			return storeRun(f, check, func(p *printer, st backend.Store, cfg *Config) error {
				a, err := st.FindIdentity(cmd.Context(), session, args[0])
				if err != nil {
					return err
				}
				if _, err := admission.Authorize(cmd.Context(), st, a.Session, cfg.Principal, backend.ActInspect, ""); err != nil {
					return err
				}
				return printAdmission(p, a)
			})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "look only in this session")
	return cmd
}

func newResolveCmd(f *Factory) *cobra.Command {
	var as string
	cmd := &cobra.Command{
		Use:   "resolve ADMISSION --as interrupted|completed|requeue",
		Short: "Settle an unknown admission, or put it back in the queue",
		Long: `Resolve decides what happened to an admission left unknown by a drainer that
lost its lease: --as completed or interrupted settles it (done), --as requeue
puts it back in the queue at its seq. Exit 4 when it is not unknown.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAdmissionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error {
				switch backend.Resolution(as) {
				case backend.ResolveCompleted, backend.ResolveInterrupted, backend.ResolveRequeue:
					return nil
				}
				return backend.Errorf(backend.ErrInvalid, "resolve --as %q: want interrupted, completed or requeue", as)
			}
			return admissionRun(f, args[0], backend.ActOperate, check, func(p *printer, st backend.Store) error {
				return resolve(cmd.Context(), f, p, st, args[0], as)
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "interrupted, completed or requeue")
	_ = cmd.MarkFlagRequired("as")
	_ = cmd.RegisterFlagCompletionFunc("as", fixedCompletion("interrupted", "completed", "requeue"))
	return cmd
}

// resolve settles or requeues an unknown admission; id and as are checked.
func resolve(ctx context.Context, f *Factory, p *printer, st backend.Store, id, as string) error {
	a, err := st.Resolve(ctx, id, backend.Resolution(as), f.Now())
	if err != nil {
		return err
	}
	return p.object(a, textf("resolved %s as %s (status %s)\n", a.ID, as, a.Status))
}

func newCancelCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:               "cancel ADMISSION",
		Short:             "Cancel a queued admission",
		Long:              "Cancel settles a queued admission as cancelled; it will not run. Exit 4 when it is not queued.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeAdmissionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admissionRun(f, args[0], backend.ActOperate, nil, func(p *printer, st backend.Store) error {
				a, err := st.Cancel(cmd.Context(), args[0], f.Now())
				if err != nil {
					return err
				}
				return p.object(a, textf("cancelled %s seq %d (%s)\n", a.ID, a.Seq, a.Session))
			})
		},
	}
}
