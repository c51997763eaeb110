package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// storeRun is the body of a command that uses the store: check the
// command line first, so bad input exits 2 whatever state the store is in,
// then run with the printer, the store and the config. check may be nil.
func storeRun(f *Factory, check func() error, run func(p *printer, st backend.Store, cfg *Config) error) error {
	cfg, p, err := f.configAndPrinter()
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	st, err := f.Store()
	if err != nil {
		return err
	}
	return run(p, st, cfg)
}

// sessionRun is storeRun for a command on one session: the session id is
// checked, then check (may be nil); once the store is open, the principal
// must be allowed act on the session (admission.Authorize; act "" checks
// nothing: open, and commands that check themselves).
func sessionRun(f *Factory, id string, act backend.Action, check func() error, run func(p *printer, st backend.Store, cfg *Config) error) error {
	return storeRun(f, func() error {
		if err := backend.ValidateID("session", id); err != nil {
			return err
		}
		if check != nil {
			return check()
		}
		return nil
	}, func(p *printer, st backend.Store, cfg *Config) error {
		if act != "" {
			if _, err := admission.Authorize(context.Background(), st, id, cfg.Principal, act, ""); err != nil {
				return err
			}
		}
		return run(p, st, cfg)
	})
}

// admissionRun is storeRun for a command on one admission: the admission
// id is checked, then check (may be nil), before the store is opened; then
// the principal must be allowed act on the admission's session.
func admissionRun(f *Factory, id string, act backend.Action, check func() error, run func(p *printer, st backend.Store) error) error {
	return storeRun(f, func() error {
		if err := backend.ValidateToken("admission id", id); err != nil {
			return err
		}
		if check != nil {
			return check()
		}
		return nil
	}, func(p *printer, st backend.Store, cfg *Config) error {
		if _, err := admission.AuthorizeAdmission(context.Background(), st, id, cfg.Principal, act); err != nil {
			return err
		}
		return run(p, st)
	})
}

// groupRun is the run function of a command that only groups subcommands
// (session, viewer): without arguments it prints its help; an unknown
// subcommand is a usage error (cobra's NoArgs check), not help with exit 0.
func groupRun(cmd *cobra.Command, _ []string) error { return cmd.Help() }
