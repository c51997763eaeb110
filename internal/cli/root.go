package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// commands are the top-level commands, in the order help lists them.
var commands = []struct {
	name  string
	build func(*Factory) *cobra.Command
}{
	{"admit", newAdmitCmd},
	{"drain", newDrainCmd},
	{"session", newSessionCmd},
	{"sessions", newSessionsCmd},
	{"viewer", newViewerCmd},
	{"attach", newAttachCmd},
	{"queue", newQueueCmd},
	{"show", newShowCmd},
	{"find", newFindCmd},
	{"transcript", newTranscriptCmd},
	{"resolve", newResolveCmd},
	{"cancel", newCancelCmd},
	{"replay", newReplayCmd},
	{"stats", newStatsCmd},
	{"check", newCheckCmd},
	{"compact", newCompactCmd},
	{"top", newTopCmd},
	{"version", newVersionCmd},
	{"export", newExportCmd},
	{"import", newImportCmd},
	{"admin", newAdminCmd},
	{"producers", newProducersCmd},
	{"delegate", newDelegateCmd},
	{"doctor", newDoctorCmd},
	{"proc", newProcCmd},
}

// NewRootCmd builds the whole command tree of one invocation around f. It
// binds the persistent flags to f's viper instance; nothing is read or
// opened until a command runs.
func NewRootCmd(f *Factory) *cobra.Command { return wholeTree(f, newRoot(f)) }

// NewRootCmdFor builds the tree that runs the command line args: when they
// name a top-level command (after any of the root's flags), the root with
// that command alone, else the whole tree (the root's help, help topics,
// completion and the suggestions for a mistyped command need it). A
// command runs, prints its help and its errors alike in both; building
// only it spares every run of a script's `hermesq admit` the other two
// dozen commands and their flags.
func NewRootCmdFor(f *Factory, args []string) *cobra.Command {
	root := newRoot(f)
	stubs := make([]*cobra.Command, len(commands))
	for i, c := range commands {
		stubs[i] = &cobra.Command{Use: c.name}
	}
	root.AddCommand(stubs...)
	found, _, err := root.Find(args)
	root.RemoveCommand(stubs...)
	if err == nil && found != root {
		for i, stub := range stubs {
			if stub == found {
				root.AddCommand(commands[i].build(f))
				markRunErrors(root)
				return root
			}
		}
	}
	return wholeTree(f, root)
}

// wholeTree adds every command and the help topics to root.
func wholeTree(f *Factory, root *cobra.Command) *cobra.Command {
	for _, c := range commands {
		root.AddCommand(c.build(f))
	}
	root.SetHelpCommand(newHelpCmd())
	markRunErrors(root)
	return root
}

// newRoot is the root command alone, its persistent flags bound to f's
// viper instance.
func newRoot(f *Factory) *cobra.Command {
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
		// The root runs only for --version (and, without it, prints its
		// help, as cobra does for a command that cannot run). cobra's own
		// version flag is not used: printing this line through it needs
		// SetVersionTemplate, which links text/template, whose method
		// lookup by name makes the linker keep every exported method of
		// every type in the binary (go-redis's command set alone is
		// megabytes), and each start faults in more of them.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if v, _ := cmd.Flags().GetBool("version"); v {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), readVersion().String())
				return err
			}
			return cmd.Help()
		},
	}
	root.Flags().BoolP("version", "v", false, "print hermesq's version, commit and Go version")
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
