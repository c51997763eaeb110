package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

func newCompactCmd(f *Factory) *cobra.Command {
	var req admission.CompactRequest
	cmd := &cobra.Command{
		Use:   "compact --older-than D [--session S] [--dry-run]",
		Short: "Remove old settled admissions, keeping their identities resolvable",
		Long: `Compact removes the done admissions (completed, failed, interrupted,
cancelled) settled more than --older-than ago, with their payloads, from every
session (or --session S). Each leaves a small tombstone: its fields without
the payload, and the payload's SHA-1. Identities, request ids and admission
ids of removed admissions keep resolving: a later re-offer is a duplicate
(exit 0), no new admission, no new note, no new turn; a duplicate result and
'show'/'find' carry the tombstone, with "payload": null. 'queue', 'stats'
and 'replay' no longer see it. Queued, running and unknown admissions,
transcripts and their messages are never removed.

Then the space is given back: on bbolt a compacted copy of the file is
written beside it, synced, and renamed over it under the store's lock (a
crash leaves the old file or the new one, both complete); on Redis the
allocator is asked to release freed memory. The store's size before and after
is reported (bbolt: the file; Redis: used_memory of the server).

A cutoff before 1970-01-01 (--older-than longer than the time since then) is
refused (exit 2). --dry-run lists what would be removed and changes nothing.`,
		Example:           "  hermesq compact --older-than 720h --dry-run\n  hermesq compact --older-than 720h",
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			check := func() error {
				if !cmd.Flags().Changed("older-than") {
					return backend.Errorf(backend.ErrInvalid, "compact needs --older-than D (e.g. 720h)")
				}
				if req.OlderThan <= 0 {
					return backend.Errorf(backend.ErrInvalid, "compact --older-than %v: want a positive duration", req.OlderThan)
				}
				if req.Session != "" {
					return backend.ValidateID("session", req.Session)
				}
				return nil
			}
			return storeRun(f, check, func(p *printer, st backend.Store, cfg *Config) error {
				// Compacting removes records: a session's owner may compact
				// it; every session at once is an admin's where the store
				// authenticates its callers.
				if req.Session != "" {
					if _, err := admission.Authorize(cmd.Context(), st, req.Session, cfg.Principal, backend.ActOperate, ""); err != nil {
						return err
					}
				} else if err := requireAdmin(cfg, "compact"); err != nil {
					return err
				}
				svc := &admission.Service{Store: st, Now: f.Now, MaxPayload: cfg.PayloadLimit}
				rep, err := svc.Compact(cmd.Context(), req)
				if err != nil {
					return err
				}
				return p.object(rep, func(w io.Writer) error { return compactText(w, rep) })
			})
		},
	}
	cmd.Flags().DurationVar(&req.OlderThan, "older-than", 0, "remove done admissions settled more than this long ago (e.g. 720h)")
	cmd.Flags().StringVar(&req.Session, "session", "", "only this session")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "list what would be removed; change nothing")
	_ = cmd.RegisterFlagCompletionFunc("session", completeSessionIDs(f))
	return cmd
}

func compactText(w io.Writer, rep admission.CompactReport) error {
	verb := "compacted"
	if rep.DryRun {
		verb = "would compact"
	}
	for _, s := range rep.Sessions {
		if _, err := fmt.Fprintf(w, "%s %d admissions of %s\n", verb, len(s.Compacted), s.Session); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "%s %d admissions settled before %s\n", verb, rep.Compacted, rep.Before.Format(time.RFC3339)); err != nil {
		return err
	}
	if rep.DryRun {
		return nil
	}
	_, err := fmt.Fprintf(w, "store size: %d bytes before, %d bytes after\n", rep.SizeBefore, rep.SizeAfter)
	return err
}
