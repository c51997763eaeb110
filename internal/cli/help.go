package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/backend"
)

// exitCodesTable is the exit-code table of the contract (docs/contract.md §9).
const exitCodesTable = `  0    success (a duplicate admission is a success)
  1    unexpected failure (also: store unreadable or corrupt)
  2    usage or invalid input (bad flag, JSON or id; payload too large; no handler)
  3    not found
  4    conflict (request id reused; session closed; close while busy)
  5    fenced, or the drain lease is held by another drainer
  6    needs attention (paused on an unknown admission; a turn failed; misrouted;
       producers run --once: events rejected or left waiting after a refusal)
  7    permission denied (principal not allowed; Redis auth refused)
  8    producers run: a producer plugin failed (crashed, hung or missed a
       call deadline too often, failed its pinned sha256, speaks another
       protocol version, cannot be executed, reported a permanent
       failure); the other plugins ran
  75   store temporarily unavailable or locked (retry later)
  130  drain or producers run interrupted by SIGINT
  143  drain or producers run interrupted by SIGTERM

With -o json the error object on stderr carries one of the codes invalid,
not_found, conflict, fenced, attention, forbidden, unavailable or internal;
an interrupted drain (130, 143) reports "unavailable": what is queued stays
queued, and the drain may be run again.

'hermesq check' follows the Nagios plugin conventions instead: 0 OK,
1 WARNING, 2 CRITICAL, 3 UNKNOWN (the check could not be made).
`

// newHelpCmd is cobra's help command with one additional topic,
// `hermesq help exit-codes`.
func newHelpCmd() *cobra.Command {
	help := &cobra.Command{
		Use:   "help [command | topic]",
		Short: "Help about any command, or a topic (exit-codes, limits)",
		Long: `Help prints the help of any command: hermesq help [path to command].

Topics:
  exit-codes   the exit codes of every command
  limits       the size and shape limits on every input`,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			if len(args) == 0 && strings.HasPrefix("exit-codes", toComplete) {
				out = append(out, cobra.CompletionWithDesc("exit-codes", "the exit codes of every command"))
			}
			if len(args) == 0 && strings.HasPrefix("limits", toComplete) {
				out = append(out, cobra.CompletionWithDesc("limits", "the size and shape limits on every input"))
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, _, err := c.Root().Find(args)
			if cmd == nil || err != nil {
				return fmt.Errorf("unknown help topic %q (see 'hermesq help'): %w", strings.Join(args, " "), backend.ErrInvalid)
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
	help.AddCommand(&cobra.Command{
		Use:   "exit-codes",
		Short: "The exit codes of every command",
		Long:  "Every hermesq command exits with one of these codes:\n\n" + exitCodesTable,
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(c.OutOrStdout(), "Every hermesq command exits with one of these codes:\n\n"+exitCodesTable)
			return err
		},
	})
	help.AddCommand(&cobra.Command{
		Use:   "limits",
		Short: "The size and shape limits on every input",
		Long:  limitsText(),
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(c.OutOrStdout(), limitsText())
			return err
		},
	})
	return help
}

// limitsText lists every input limit, its value and how a refusal reads
// (exit 2 unless said otherwise).
func limitsText() string {
	var b strings.Builder
	b.WriteString("Every input is checked against these limits; a refusal exits 2 with its own\none-line message, and nothing is written.\n\n")
	for _, l := range backend.Limits() {
		fmt.Fprintf(&b, "  %-42s %s\n  %-42s refused as: %s\n", l.Name, l.Value, "", l.Error)
	}
	return b.String()
}
