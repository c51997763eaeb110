package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/backend"
)

// The store-wide admin right: an admin may act as any principal
// (--principal) and, on a store that authenticates its callers, export,
// import and list every session. It is kept in the store; only whoever
// administers the store itself may grant or revoke it: on Redis, a user
// allowed to manage ACL users (ACL USERS succeeds: such a user could give
// itself any right anyway); on bbolt, the owner of the store file.

func newAdminCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Grant, revoke or list the store-wide admin right",
		Long: `An admin may act as any principal (--principal) and, on a store that
authenticates its callers (Redis ACL users), export, import and list every
session. Only whoever administers the store itself may grant or revoke it: on
Redis a user allowed to manage ACL users, on bbolt the owner of the file.`,
		Args: cobra.NoArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(newAdminSetCmd(f, true), newAdminSetCmd(f, false), newAdminListCmd(f))
	return cmd
}

func newAdminSetCmd(f *Factory, grant bool) *cobra.Command {
	verb, short := "grant", "Give a principal the admin right"
	if !grant {
		verb, short = "revoke", "Take the admin right from a principal (exit 3 when it has none)"
	}
	return &cobra.Command{
		Use:   verb + " PRINCIPAL",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func() error { return backend.CheckSetAdmin(args[0], grant) }
			return storeRun(f, check, func(p *printer, st backend.Store, cfg *Config) error {
				if !cfg.StoreAdmin {
					return backend.Errorf(backend.ErrForbidden, "admin %s: %q does not administer this store (on Redis: a user allowed to manage ACL users; on bbolt: the file's owner)", verb, termtext.OrDash(cfg.Caller))
				}
				if err := st.SetAdmin(cmd.Context(), args[0], grant); err != nil {
					return err
				}
				admins, err := st.Admins(cmd.Context())
				if err != nil {
					return err
				}
				return p.object(admins, textf("admin %sed: %s\n", strings.TrimSuffix(verb, "e"), args[0]))
			})
		},
	}
}

func newAdminListCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the principals with the admin right",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return storeRun(f, nil, func(p *printer, st backend.Store, _ *Config) error {
				admins, err := st.Admins(cmd.Context())
				if err != nil {
					return err
				}
				return p.object(admins, func(w io.Writer) error {
					for _, a := range admins {
						if _, err := fmt.Fprintln(w, termtext.Esc(a)); err != nil {
							return err
						}
					}
					return nil
				})
			})
		},
	}
}
