package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

type transcriptOptions struct {
	f *Factory

	Transcript string
	Session    string
	Lineage    bool
}

func newTranscriptCmd(f *Factory) *cobra.Command {
	o := &transcriptOptions{f: f}
	cmd := &cobra.Command{
		Use:   "transcript (T | --session S) [--lineage]",
		Short: "Print a transcript's messages, or its lineage",
		Long: `Transcript prints the messages of transcript T, or with --session S those
of the session's current transcript. With --lineage it prints the chain of
transcripts instead (root … tip, linked by compression).`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Transcript = args[0]
			}
			return runTranscript(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Session, "session", "", "the session whose current transcript to print")
	cmd.Flags().BoolVar(&o.Lineage, "lineage", false, "print the lineage (root … tip) instead of the messages")
	return cmd
}

func runTranscript(ctx context.Context, o *transcriptOptions) error {
	p, err := o.f.printer()
	if err != nil {
		return err
	}
	switch {
	case o.Transcript != "" && o.Session != "":
		return backend.Errorf(backend.ErrInvalid, "transcript: give T or --session S, not both")
	case o.Transcript == "" && o.Session == "":
		return backend.Errorf(backend.ErrInvalid, "transcript: give T or --session S")
	case o.Session != "":
		if err := backend.ValidateID("session", o.Session); err != nil {
			return err
		}
	default:
		if err := backend.ValidateID("transcript", o.Transcript); err != nil {
			return err
		}
	}
	svc, err := o.f.Admission()
	if err != nil {
		return err
	}
	cfg, err := o.f.Config()
	if err != nil {
		return err
	}
	t := o.Transcript
	if o.Session != "" {
		s, err := admission.Authorize(ctx, svc.Store, o.Session, cfg.Principal, backend.ActInspect, "")
		if err != nil {
			return err
		}
		t = s.CurrentTranscript
	} else if _, err := admission.AuthorizeTranscript(ctx, svc.Store, t, cfg.Principal, backend.ActInspect); err != nil {
		return err
	}
	if o.Lineage {
		ts, err := svc.Lineage(ctx, t)
		if err != nil {
			return err
		}
		return list(p, ts, func(w io.Writer) error {
			rows := make([][]string, 0, len(ts))
			for _, t := range ts {
				rows = append(rows, []string{t.ID, termtext.OrDash(t.Parent), termtext.OrDash(t.Child), fmt.Sprint(t.MessageCount),
					timeText(t.EndedAt), termtext.OrDash(t.EndReason)})
			}
			return termtext.Table(w, []string{"TRANSCRIPT", "PARENT", "CHILD", "MESSAGES", "ENDED", "REASON"}, rows)
		})
	}
	// Not found is told apart from empty: read the transcript first.
	if _, err := svc.Store.GetTranscript(ctx, t); err != nil {
		return err
	}
	ms, err := svc.Store.ListMessages(ctx, t, 0, 0)
	if err != nil {
		return err
	}
	return list(p, ms, func(w io.Writer) error {
		for _, m := range ms {
			if err := messageText(w, m); err != nil {
				return err
			}
		}
		return nil
	})
}
