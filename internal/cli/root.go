package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// NewRootCmd builds the whole command tree of one invocation around f. It
// binds the persistent flags to f's viper instance; nothing is read or
// opened until a command runs.
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "hermesq",
		Short: "Durable per-session FIFO queues of inputs for conversational agents",
		Long: `hermesq keeps durable, per-session FIFO queues of inputs for conversational
agents and executes them in order. An input admitted with 'hermesq admit' is
committed before the command returns, is never lost and never executed twice;
'hermesq drain' executes a session's queue under a fenced drain lease, as a
turn (the handler runs) or, for automation input nobody watches, as a note.

Stores: bbolt:///abs/path.db (the default, one machine) and
redis://[user:pass@]host:port/db or rediss:// (several machines).

Configuration: flag > HERMESQ_* environment > config file > default. The
config file ($XDG_CONFIG_HOME/hermesq/config.yaml, or --config) may set
store, output, principal, principal_override, timeout, handler.command (a
list of strings), handler.timeout, drain.lease, drain.on_unknown and
payload_limit.

Principal: on Redis with ACL users, the authenticated user (another
--principal is refused, exit 7, unless that user is an admin); on bbolt, the
OS user (another only with principal_override: true). See 'hermesq session
grant --help' for roles and 'hermesq help limits' for input limits.

Data goes to stdout; diagnostics go to stderr as one line
"hermesq: error: ...", or with -o json as {"error":"CODE","message":"..."}.

Exit codes:
` + exitCodesTable,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Completions and man pages are generated and checked in; keep them
		// free of dates.
		DisableAutoGenTag: true,
		Version:           readVersion().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v (see '%s --help')", err, c.CommandPath())
	})

	pf := root.PersistentFlags()
	pf.String("store", "", "store URL: bbolt:///abs/path.db, redis://host:port/db, rediss://… (env HERMESQ_STORE; default bbolt://$XDG_STATE_HOME/hermesq/hermesq.db)")
	pf.String("config", "", "config file (env HERMESQ_CONFIG; default $XDG_CONFIG_HOME/hermesq/config.yaml if it exists)")
	pf.StringP("output", "o", formatText, "output format: text, json or jsonl (env HERMESQ_OUTPUT)")
	pf.String("principal", "", "act as this principal (env HERMESQ_PRINCIPAL; default: the Redis ACL user, or the OS user; another needs admin or, on bbolt, principal_override)")
	pf.Duration("timeout", defaultTimeout, "how long to wait for the store: lock, dial, read (env HERMESQ_TIMEOUT)")
	for _, k := range []string{keyStore, keyConfig, keyOutput, keyPrincipal, keyTimeout} {
		_ = f.v.BindPFlag(k, pf.Lookup(k))
	}
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletion(formatText, formatJSON, formatJSONL))
	_ = root.MarkPersistentFlagFilename("config", "yaml", "yml", "json", "toml")

	root.AddCommand(
		newAdmitCmd(f),
		newDrainCmd(f),
		newSessionCmd(f),
		newSessionsCmd(f),
		newViewerCmd(f),
		newAttachCmd(f),
		newQueueCmd(f),
		newShowCmd(f),
		newFindCmd(f),
		newTranscriptCmd(f),
		newResolveCmd(f),
		newCancelCmd(f),
		newReplayCmd(f),
		newStatsCmd(f),
		newCheckCmd(f),
		newCompactCmd(f),
		newTopCmd(f),
		newVersionCmd(f),
		newExportCmd(f),
		newImportCmd(f),
		newAdminCmd(f),
		newProducersCmd(f),
		newDelegateCmd(f),
		newDoctorCmd(f),
		newProcCmd(f),
	)
	root.SetHelpCommand(newHelpCmd())
	markRunErrors(root)
	return root
}

// markRunErrors wraps every command's run functions so that the errors they
// return are told apart from cobra's own usage errors (see ExitCode).
func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	if pre := c.PersistentPreRunE; pre != nil {
		c.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
			if err := pre(cmd, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}
