package cli

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Dynamic completion: session and admission ids read from the store while
// the user presses TAB. A shell waits for it, so it gives up quickly, never
// prints an error and never creates a store: a bbolt file that does not
// exist yet completes nothing.

// completionTimeout bounds one completion's wait for the store.
const completionTimeout = time.Second

// completionStore opens the configured store for completion, or returns nil.
func completionStore(f *Factory) backend.Store {
	cfg, err := f.Config()
	if err != nil {
		return nil
	}
	if u, err := url.Parse(cfg.Store); err == nil && u.Scheme == "bbolt" {
		if _, err := os.Stat(u.Path); err != nil {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	st, err := f.Registry.Open(ctx, cfg.Store, backend.Options{Timeout: completionTimeout})
	if err != nil {
		return nil
	}
	return st
}

// completeSessionArg completes a command's first argument with the
// store's session ids (drain, queue, session show…).
func completeSessionArg(f *Factory) cobra.CompletionFunc {
	return firstArg(completeSessionIDs(f))
}

// firstArg completes only a command's first argument with complete.
func firstArg(complete cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}

// completeSessionIDs completes a value (an argument, a --session flag) with
// the store's session ids.
func completeSessionIDs(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		st := completionStore(f)
		if st == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		ss, err := st.ListSessions(ctx, time.Time{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, s := range ss {
			if strings.HasPrefix(s.ID, toComplete) {
				out = append(out, cobra.CompletionWithDesc(s.ID, s.State()+", depth "+strconv.Itoa(s.Queued)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeAdmissionArg completes a command's one argument with admission
// ids (show, cancel, resolve).
func completeAdmissionArg(f *Factory) cobra.CompletionFunc {
	return firstArg(completeAdmissionIDs(f))
}

// completeAdmissionIDs completes admission ids: those of every session,
// newest first per session, at most maxAdmissionCompletions; with a
// --session flag set, only that session's.
func completeAdmissionIDs(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		st := completionStore(f)
		if st == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		sessions := []string{}
		if fl := cmd.Flags().Lookup("session"); fl != nil && fl.Value.String() != "" {
			sessions = append(sessions, fl.Value.String())
		} else {
			ss, err := st.ListSessions(ctx, time.Time{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, s := range ss {
				sessions = append(sessions, s.ID)
			}
		}
		var out []cobra.Completion
		for _, sid := range sessions {
			as, err := st.ListAdmissions(ctx, sid, backend.AdmissionFilter{})
			if err != nil {
				continue
			}
			for i := len(as) - 1; i >= 0 && len(out) < maxAdmissionCompletions; i-- {
				a := as[i]
				if strings.HasPrefix(a.ID, toComplete) {
					desc := a.Session + " #" + strconv.FormatUint(a.Seq, 10) + " " + string(a.Status)
					if a.Outcome != "" {
						desc += "/" + string(a.Outcome)
					}
					out = append(out, cobra.CompletionWithDesc(a.ID, desc))
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// maxAdmissionCompletions bounds the admission ids one TAB lists.
const maxAdmissionCompletions = 200

// fixedCompletion completes a flag or argument from a fixed list, without
// files.
func fixedCompletion(values ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, toComplete) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
