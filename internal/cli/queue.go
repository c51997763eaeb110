package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/backend"
)

type queueOptions struct {
	f *Factory

	Session  string
	Statuses []string
	Outcomes []string

	statusSet, outcomeSet bool
}

func newQueueCmd(f *Factory) *cobra.Command {
	o := &queueOptions{f: f}
	cmd := &cobra.Command{
		Use:   "queue SESSION [--status queued,running,…] [--outcome failed,…]",
		Short: "List a session's admissions in FIFO order",
		Long: `Queue lists the session's admissions in seq order, every status by default.
--status takes queued, running, unknown, done; --outcome takes completed,
failed, interrupted, cancelled (both comma-separated or repeated). An
unknown or empty value exits 2.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSessionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Session = args[0]
			o.statusSet = cmd.Flags().Changed("status")
			o.outcomeSet = cmd.Flags().Changed("outcome")
			var filter backend.AdmissionFilter
			check := func() (err error) {
				filter, err = o.filter()
				return err
			}
			return sessionRun(f, o.Session, backend.ActInspect, check, func(p *printer, st backend.Store, _ *Config) error {
				as, err := st.ListAdmissions(cmd.Context(), o.Session, filter)
				if err != nil {
					return err
				}
				return list(p, as, func(w io.Writer) error { return admissionTable(w, as, p.textWidth()) })
			})
		},
	}
	cmd.Flags().StringSliceVar(&o.Statuses, "status", nil, "only these statuses: queued, running, unknown, done")
	cmd.Flags().StringSliceVar(&o.Outcomes, "outcome", nil, "only these outcomes: completed, failed, interrupted, cancelled")
	_ = cmd.RegisterFlagCompletionFunc("status", fixedCompletion("queued", "running", "unknown", "done"))
	_ = cmd.RegisterFlagCompletionFunc("outcome", fixedCompletion("completed", "failed", "interrupted", "cancelled"))
	return cmd
}

// filter parses --status and --outcome. Spaces around a value are
// ignored; a flag given with no value (--status "", as an unset shell
// variable gives) is refused rather than read as "every status".
func (o *queueOptions) filter() (f backend.AdmissionFilter, err error) {
	f.Statuses, err = enumFlag("status", o.statusSet, o.Statuses,
		backend.StatusQueued, backend.StatusRunning, backend.StatusUnknown, backend.StatusDone)
	if err != nil {
		return f, err
	}
	f.Outcomes, err = enumFlag("outcome", o.outcomeSet, o.Outcomes,
		backend.OutcomeCompleted, backend.OutcomeFailed, backend.OutcomeInterrupted, backend.OutcomeCancelled)
	return f, err
}
