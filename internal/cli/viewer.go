package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/backend"
)

const defaultViewerTTL = 60 * time.Second

func newViewerCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "viewer",
		Short: "Add or remove a viewer lease on a session (for scripts)",
		Long: `A viewer is someone watching a session: while a session has a live viewer,
automation input to an open transcript runs as a turn instead of a note.
'viewer add' takes a lease of --ttl and prints its id; 'viewer rm' ends it.
'hermesq attach' holds a viewer with a heartbeat for as long as it runs.`,
		Args: cobra.NoArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(newViewerAddCmd(f), newViewerRmCmd(f))
	return cmd
}

func newViewerAddCmd(f *Factory) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:               "add SESSION [--ttl 60s]",
		Short:             "Add a viewer lease and print its id",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error {
				if ttl < minLease {
					return backend.Errorf(backend.ErrInvalid, "viewer --ttl %s: must be at least %s", ttl, minLease)
				}
				return nil
			}
			return sessionRun(f, args[0], backend.ActInspect, check, func(p *printer, _ backend.Store, _ *Config) error {
				svc, err := f.Admission()
				if err != nil {
					return err
				}
				v, err := svc.AddViewer(cmd.Context(), args[0], ttl)
				if err != nil {
					return err
				}
				return p.object(v, textf("%s\n", v.ID))
			})
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", defaultViewerTTL, "how long the viewer lease lasts")
	return cmd
}

func newViewerRmCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:               "rm SESSION VIEWER",
		Short:             "Remove a viewer lease",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error { return backend.ValidateToken("viewer id", args[1]) }
			return sessionRun(f, args[0], backend.ActInspect, check, func(p *printer, st backend.Store, _ *Config) error {
				if err := st.RemoveViewer(cmd.Context(), args[0], args[1]); err != nil {
					return err
				}
				out := struct {
					ID      string `json:"id"`
					Session string `json:"session"`
					Removed bool   `json:"removed"`
				}{args[1], args[0], true}
				return p.object(out, textf("removed viewer %s (%s)\n", args[1], args[0]))
			})
		},
	}
}
