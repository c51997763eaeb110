package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/hermesq/hermesq/pkg/backend"
)

// resolvePrincipal decides who this invocation acts as, once the store is
// open (docs/contract.md §10), and sets cfg.Principal and cfg.Admin:
//
//   - a store that authenticates its callers (Redis with ACL users) names
//     the principal: the ACL user. A --principal (or HERMESQ_PRINCIPAL, or
//     the config file's principal) that differs is refused (exit 7) unless
//     that user has the admin right (hermesq admin grant);
//   - a file store (bbolt) takes the OS user; another principal is
//     allowed only with principal_override: true in the configuration (the
//     file's 0600 mode is the boundary: whoever can open it can write it
//     all) or for an admin;
//   - Redis's default user names no one: the principal is the one asked
//     for, or the OS user, and nothing protects it from being claimed.
func resolvePrincipal(ctx context.Context, st backend.Store, cfg *Config) error {
	c, err := st.Caller(ctx)
	if err != nil {
		return err
	}
	cfg.Authenticated, cfg.Caller, cfg.StoreAdmin = c.Verified, c.Name, c.StoreAdmin
	if c.Name == "" {
		return nil // Principal stays the requested one or the OS user
	}
	admins, err := st.Admins(ctx)
	if err != nil {
		return err
	}
	// A Redis user that may manage ACL users could grant itself the
	// right: it is an admin. (A file's owner is not: on a file store the
	// configuration decides who may act as another principal.)
	cfg.Admin = (c.Verified && c.StoreAdmin) || slices.Contains(admins, c.Name)
	switch {
	case cfg.Requested == "" || cfg.Requested == c.Name:
		cfg.Principal = c.Name
	case cfg.Admin:
		cfg.Principal = cfg.Requested
	case !c.Verified && cfg.Override:
		cfg.Principal = cfg.Requested
	case c.Verified:
		return backend.Errorf(backend.ErrForbidden,
			"principal %q: the store authenticated this connection as %q, which may act only as itself (an admin may act as another: hermesq admin grant %s)",
			cfg.Requested, c.Name, c.Name)
	default:
		return backend.Errorf(backend.ErrForbidden,
			"principal %q: this file store is used by the OS user %q, who acts as itself unless the configuration sets principal_override: true",
			cfg.Requested, c.Name)
	}
	return nil
}

// requireAdmin is requireAdmin of the invocation's configuration, once
// the store is open.
func (f *Factory) requireAdmin(what string) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	return requireAdmin(cfg, what)
}

// requireAdmin refuses what only an admin may do on a store that
// authenticates its callers (export, import): there, reading or writing
// every session is an admin's. Where the store authenticates no one (a
// file store, Redis's default user) whoever can open it may.
func requireAdmin(cfg *Config, what string) error {
	if cfg.Admin || !cfg.Authenticated {
		return nil
	}
	return fmt.Errorf("%s: principal %q is not an admin of this store (hermesq admin grant): %w", what, cfg.Principal, backend.ErrForbidden)
}
