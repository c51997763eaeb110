package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/spf13/viper"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/internal/top"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
	redisstore "github.com/hermesq/hermesq/plugins/storage/redis"
)

// Factory holds what commands share during one invocation: the I/O streams
// and lazy accessors for the configuration and the store. Nothing is read or
// opened until a command asks for it, so --help and completion never touch
// the config file or the store.
type Factory struct {
	IO *IOStreams
	// Registry maps store URL schemes to openers.
	Registry *backend.Registry
	// Now is the clock for operator commands (resolve, cancel, close…).
	Now func() time.Time
	// Signals relays the given signals to the returned channel until stop is
	// called: how drain and attach learn of SIGINT and SIGTERM. Tests
	// replace it to deliver signals without sending them to the process.
	Signals func(sig ...os.Signal) (ch <-chan os.Signal, stop func())
	// Launch starts producer plugins (`producers run`): set in
	// hermesq-producers, nil in hermesq, which runs hermesq-producers for
	// that command instead.
	Launch Launcher
	// Top draws `hermesq top`: set in hermesq-top, nil in hermesq, which
	// runs hermesq-top for that command instead.
	Top top.View

	v *viper.Viper

	cfgOnce sync.Once
	cfg     *Config
	cfgErr  error

	// mayCreate lets Store create a store that does not exist yet: set by
	// the commands that write (MayCreateStore). Every other command opens
	// an existing store only, so reading never creates one.
	mayCreate bool

	storeMu  sync.Mutex
	store    backend.Store
	storeErr error
	opened   bool
}

// NewFactory returns the factory of one invocation, with its own viper
// instance and a registry of the built-in stores.
func NewFactory(ios *IOStreams) *Factory {
	return &Factory{
		IO:       ios,
		Registry: NewRegistry(),
		Now:      time.Now,
		Signals:  notifySignals,
		v:        newViper(),
	}
}

// NewRegistry returns a registry of the built-in stores: bbolt (scheme
// "bbolt") and Redis ("redis", "rediss").
func NewRegistry() *backend.Registry {
	r := backend.NewRegistry()
	r.Register("bbolt", boltstore.Opener)
	r.Register("redis", redisstore.Opener)
	r.Register("rediss", redisstore.Opener)
	return r
}

func notifySignals(sig ...os.Signal) (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sig...)
	return ch, func() { signal.Stop(ch) }
}

// Viper is the invocation's configuration instance (commands bind their
// flags to it).
func (f *Factory) Viper() *viper.Viper { return f.v }

// Config resolves the configuration once: flags, HERMESQ_* environment,
// config file, defaults.
func (f *Factory) Config() (*Config, error) {
	f.cfgOnce.Do(func() {
		f.cfg, f.cfgErr = loadConfig(f.v)
		if f.cfg != nil {
			for _, w := range f.cfg.Warnings {
				fmt.Fprintf(f.IO.ErrOut, "hermesq: warning: %s\n", termtext.Esc(w))
			}
		}
	})
	return f.cfg, f.cfgErr
}

// MayCreateStore lets this invocation's Store create the store when it
// does not exist: for the commands that write (admit, session open,
// import, drain). Without it, a store that does not exist is ErrNotFound
// (exit 3) and nothing is created.
func (f *Factory) MayCreateStore() { f.mayCreate = true }

// Store opens the configured store on first use.
func (f *Factory) Store() (backend.Store, error) {
	f.storeMu.Lock()
	defer f.storeMu.Unlock()
	if f.opened {
		return f.store, f.storeErr
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+time.Second)
	defer cancel()
	st, err := f.Registry.Open(ctx, cfg.Store, backend.Options{Timeout: cfg.Timeout, MustExist: !f.mayCreate})
	if err != nil {
		// An opener may return a typed nil with its error: keep no store.
		st = nil
	} else if err = resolvePrincipal(ctx, st, cfg); err != nil {
		_ = st.Close()
		st = nil
	}
	f.store, f.storeErr, f.opened = st, err, true
	return f.store, f.storeErr
}

// Admission returns the admission service over the configured store.
func (f *Factory) Admission() (*admission.Service, error) {
	st, err := f.Store()
	if err != nil {
		return nil, err
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	return &admission.Service{Store: st, MaxPayload: cfg.PayloadLimit}, nil
}

// Close closes the store if it was opened.
func (f *Factory) Close() error {
	f.storeMu.Lock()
	defer f.storeMu.Unlock()
	if f.store == nil {
		return nil
	}
	err := f.store.Close()
	f.store = nil
	return err
}

// output is the output format, resolved even when the rest of the
// configuration is broken (for error messages).
func (f *Factory) output() string {
	if f.cfg != nil {
		return f.cfg.Output
	}
	return outputOf(f.v)
}
