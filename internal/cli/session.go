package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

func newSessionCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Open, show, close, compress, switch, grant or revoke a session",
		Args:  cobra.NoArgs,
		RunE:  groupRun,
	}
	cmd.AddCommand(
		newSessionOpenCmd(f),
		newSessionShowCmd(f),
		newSessionCloseCmd(f),
		newSessionCompressCmd(f),
		newSessionSwitchCmd(f),
		newSessionGrantCmd(f),
		newSessionRevokeCmd(f),
	)
	return cmd
}

func newSessionOpenCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:               "open SESSION",
		Short:             "Create a session owned by the principal",
		Long:              "Open creates the session, owned by the principal, with a first transcript of the same id. An existing session is left unchanged.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.MayCreateStore() // a command that writes may create the store
			return sessionRun(f, args[0], "", nil, func(p *printer, st backend.Store, cfg *Config) error {
				s, created, err := st.OpenSession(cmd.Context(), backend.OpenSessionRequest{ID: args[0], Owner: cfg.Principal, Now: f.Now()})
				if err != nil {
					return err
				}
				return p.object(s, func(w io.Writer) error {
					verb := "exists"
					if created {
						verb = "opened"
					}
					_, err := fmt.Fprintf(w, "%s %s (owner %s, transcript %s)\n", verb, s.ID, termtext.Esc(s.Owner), s.CurrentTranscript)
					return err
				})
			})
		},
	}
}

func newSessionShowCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:               "show SESSION",
		Short:             "Show a session: owner, current transcript, state, depth, lease",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSessionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionRun(f, args[0], backend.ActInspect, nil, func(p *printer, st backend.Store, _ *Config) error {
				s, err := st.GetSession(cmd.Context(), args[0], time.Time{})
				if err != nil {
					return err
				}
				return p.object(s, func(w io.Writer) error { return sessionFields(w, s, f.Now()) })
			})
		},
	}
}

func newSessionCloseCmd(f *Factory) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "close SESSION --reason REASON",
		Short: "End the session's current transcript (only when idle)",
		Long: "Close ends the session's current transcript with REASON, one of " + strings.Join(backend.CloseReasons, ", ") +
			", only when the session is idle (nothing queued, running or unknown); otherwise it exits 4.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error {
				if !slices.Contains(backend.CloseReasons, reason) {
					return backend.Errorf(backend.ErrInvalid, "close reason %q: want one of %s", reason, strings.Join(backend.CloseReasons, ", "))
				}
				return nil
			}
			return sessionRun(f, args[0], backend.ActOperate, check, func(p *printer, st backend.Store, _ *Config) error {
				t, err := st.CloseSession(cmd.Context(), args[0], reason, f.Now())
				if err != nil {
					return err
				}
				return p.object(t, textf("closed %s (transcript %s, %s)\n", args[0], t.ID, termtext.OrDash(t.EndReason)))
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why: "+strings.Join(backend.CloseReasons, ", "))
	_ = cmd.MarkFlagRequired("reason")
	_ = cmd.RegisterFlagCompletionFunc("reason", fixedCompletion(backend.CloseReasons...))
	return cmd
}

// defaultChild names a compression child when --child is not given:
// SESSION:<8 hex>, or a plain random id when that would be too long.
func defaultChild(session string) string {
	id := admission.NewID()
	if c := session + ":" + id[:8]; len(c) <= backend.MaxIDLen {
		return c
	}
	return id
}

func newSessionCompressCmd(f *Factory) *cobra.Command {
	var child string
	cmd := &cobra.Command{
		Use:   "compress SESSION [--child T]",
		Short: "End the current transcript (compression) and continue it in a child",
		Long: `Compress ends the session's current transcript with reason "compression" and
makes a new child transcript, whose parent it is, current. The child is named
--child, or SESSION:<8 hex digits>.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			c := child
			// Only an absent --child is named for it; --child '' is an
			// id like any other, checked and refused.
			if !cmd.Flags().Changed("child") {
				c = defaultChild(args[0])
			}
			check := func() error { return backend.ValidateID("transcript", c) }
			return sessionRun(f, args[0], backend.ActOperate, check, func(p *printer, st backend.Store, _ *Config) error {
				t, err := st.Compress(cmd.Context(), args[0], c, f.Now())
				if err != nil {
					return err
				}
				return p.object(t, func(w io.Writer) error {
					from, to := t.Parent, t.ID
					if t.Child != "" {
						from, to = t.ID, t.Child
					}
					_, err := fmt.Fprintf(w, "compressed %s: %s -> %s\n", termtext.Esc(args[0]), termtext.OrDash(from), to)
					return err
				})
			})
		},
	}
	cmd.Flags().StringVar(&child, "child", "", "id of the new child transcript")
	return cmd
}

func newSessionSwitchCmd(f *Factory) *cobra.Command {
	var transcript string
	cmd := &cobra.Command{
		Use:   "switch SESSION --transcript T",
		Short: "Point the session at another transcript (its own, or a new empty one)",
		Long: `Switch re-points the session at transcript T: one of the session's own, or a
new empty one named T (as resuming another conversation or branching would).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error { return backend.ValidateID("transcript", transcript) }
			return sessionRun(f, args[0], backend.ActOperate, check, func(p *printer, st backend.Store, _ *Config) error {
				t, err := st.Switch(cmd.Context(), args[0], transcript, f.Now())
				if err != nil {
					return err
				}
				return p.object(t, textf("switched %s -> %s\n", args[0], t.ID))
			})
		},
	}
	cmd.Flags().StringVar(&transcript, "transcript", "", "the transcript to make current")
	_ = cmd.MarkFlagRequired("transcript")
	return cmd
}

// grantText is a grant as "bob (writer: process, watch)".
func grantText(g backend.Grant) string {
	if len(g.Producers) > 0 {
		return fmt.Sprintf("%s (%s: %s)", g.Principal, g.Role, strings.Join(g.Producers, ", "))
	}
	return fmt.Sprintf("%s (%s)", g.Principal, g.Role)
}

func newSessionGrantCmd(f *Factory) *cobra.Command {
	var role string
	var producers []string
	cmd := &cobra.Command{
		Use:   "grant SESSION PRINCIPAL [--role reader|drainer|writer|owner] [--producer NAME…]",
		Short: "Give another principal a role on the session",
		Long: `Grant gives PRINCIPAL a role on the session besides its owner, replacing any
grant it had:
  reader   inspects: session show, queue, show, find, transcript, attach, viewers
  drainer  inspects and drains (hermesq drain): reads every queued input, runs
           the handler, writes the replies and notes to the transcript; a
           service principal that runs drain --all needs this grant
  writer   inspects and admits human input, and the automation input of the
           producers named with --producer (repeatable); without --producer,
           none; it does not drain
  owner    also admits any automation input, drains, closes, compresses,
           switches, resolves, cancels, replays, grants and revokes
The default role is writer. Only the owner (or an owner grant) may grant,
else exit 7.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			g := backend.Grant{Principal: args[1], Role: backend.GrantRole(role), Producers: producers}
			check := func() error { return backend.CheckGrant(g) }
			return sessionRun(f, args[0], backend.ActOperate, check, func(p *printer, st backend.Store, cfg *Config) error {
				ctx := cmd.Context()
				if err := st.Grant(ctx, args[0], g); err != nil {
					return err
				}
				s, err := st.GetSession(ctx, args[0], time.Time{})
				if err != nil {
					return err
				}
				return p.object(s, textf("granted %s on %s\n", grantText(backend.NormalGrants([]backend.Grant{g})[0]), args[0]))
			})
		},
	}
	cmd.Flags().StringVar(&role, "role", string(backend.RoleWriter), "reader, drainer, writer or owner")
	cmd.Flags().StringArrayVar(&producers, "producer", nil, "writer: a producer whose automation input it may admit (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("role", fixedCompletion("reader", "drainer", "writer", "owner"))
	return cmd
}

func newSessionRevokeCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke SESSION PRINCIPAL",
		Short: "Remove a principal's grant on the session",
		Long:  "Revoke removes PRINCIPAL's grant on the session (exit 3 when it has none). Only the owner (or an owner grant) may revoke, else exit 7.",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error { return backend.ValidateRevokedPrincipal(args[1]) }
			return sessionRun(f, args[0], backend.ActOperate, check, func(p *printer, st backend.Store, cfg *Config) error {
				ctx := cmd.Context()
				if err := st.Revoke(ctx, args[0], args[1]); err != nil {
					return err
				}
				s, err := st.GetSession(ctx, args[0], time.Time{})
				if err != nil {
					return err
				}
				return p.object(s, textf("revoked %s on %s\n", args[1], args[0]))
			})
		},
	}
}

func newSessionsCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "sessions",
		Short: "List every session",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := f.printer()
			if err != nil {
				return err
			}
			st, err := f.Store()
			if err != nil {
				return err
			}
			ss, err := st.ListSessions(cmd.Context(), time.Time{})
			if err != nil {
				return err
			}
			// Each principal lists the sessions it may inspect; an admin,
			// or anyone on a store that authenticates no one, lists all.
			if cfg, err := f.Config(); err == nil && cfg.Authenticated && !cfg.Admin {
				ss = slices.DeleteFunc(ss, func(s backend.Session) bool {
					return !backend.Permits(s.Owner, s.Grants, cfg.Principal, backend.ActInspect, "")
				})
			}
			return list(p, ss, func(w io.Writer) error {
				rows := make([][]string, 0, len(ss))
				for _, s := range ss {
					rows = append(rows, []string{s.ID, s.Owner, s.State(), fmt.Sprint(s.Queued),
						fmt.Sprint(s.Viewers), fmt.Sprint(s.Epoch), s.CurrentTranscript})
				}
				return termtext.Table(w, []string{"SESSION", "OWNER", "STATE", "DEPTH", "VIEWERS", "EPOCH", "TRANSCRIPT"}, rows)
			})
		},
	}
}
