package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

// Config is the resolved configuration of one invocation. Every value comes
// from one viper instance with the precedence flag > HERMESQ_* environment >
// config file > default.
type Config struct {
	File           string        // the config file read, "" when none
	Store          string        // store URL
	Output         string        // text, json or jsonl
	Principal      string        // who is calling: resolved against the store when it opens (principal.go)
	Requested      string        // the principal asked for (flag, environment, config file), "" for none
	Override       bool          // principal_override: a file store may act as Requested
	Admin          bool          // the caller has the store-wide admin right (set when the store opens)
	Authenticated  bool          // the store authenticated the caller (a Redis ACL user)
	Caller         string        // who the store says opened it ("" for Redis's default user)
	StoreAdmin     bool          // the caller administers the store itself (may grant admin)
	Timeout        time.Duration // store lock/dial/read wait
	HandlerCommand []string      // handler argv; nil when none configured
	HandlerTimeout time.Duration // 0: none
	DrainLease     time.Duration // 0: the admission layer's default
	OnUnknown      string        // pause, requeue or interrupt
	PayloadLimit   int           // bytes; 0: the admission layer's default
}

// Output formats.
const (
	formatText  = "text"
	formatJSON  = "json"
	formatJSONL = "jsonl"
)

// Configuration keys, their environment variables and their defaults.
const (
	keyConfig         = "config"
	keyStore          = "store"
	keyOutput         = "output"
	keyPrincipal      = "principal"
	keyTimeout        = "timeout"
	keyHandlerCommand = "handler.command"
	keyHandlerTimeout = "handler.timeout"
	keyDrainLease     = "drain.lease"
	keyOnUnknown      = "drain.on_unknown"
	keyPayloadLimit   = "payload_limit"
	keyOverride       = "principal_override"

	defaultTimeout = 10 * time.Second
	maxPayloadMax  = backend.MaxPayloadLimit
)

var configKeys = []string{
	keyConfig, keyStore, keyOutput, keyPrincipal, keyTimeout,
	keyHandlerCommand, keyHandlerTimeout, keyDrainLease, keyOnUnknown, keyPayloadLimit, keyOverride,
}

// newViper returns the invocation's viper instance with its environment
// bindings and defaults; flags are bound by the commands that define them.
func newViper() *viper.Viper {
	v := viper.New()
	for _, k := range configKeys {
		_ = v.BindEnv(k, envName(k))
	}
	bindProducerEnv(v)
	v.SetDefault(keyOutput, formatText)
	v.SetDefault(keyTimeout, defaultTimeout.String())
	v.SetDefault(keyOnUnknown, "pause")
	return v
}

// envName is the HERMESQ_* variable of a key: handler.command →
// HERMESQ_HANDLER_COMMAND.
func envName(key string) string {
	return "HERMESQ_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// defaultConfigFile is $XDG_CONFIG_HOME/hermesq/config.yaml (XDG default
// ~/.config), or "" when the home directory is unknown.
func defaultConfigFile() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "hermesq", "config.yaml")
}

// readConfigFile reads the config file named by --config / HERMESQ_CONFIG,
// or the default one when it exists. A named file that cannot be read is an
// error; a missing default file is not.
func readConfigFile(v *viper.Viper) (string, error) {
	path := v.GetString(keyConfig)
	if path == "" {
		path = defaultConfigFile()
		if path == "" {
			return "", nil
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
	}
	v.SetConfigFile(path)
	if filepath.Ext(path) == "" {
		v.SetConfigType("yaml")
	}
	if err := v.ReadInConfig(); err != nil {
		return "", fmt.Errorf("config file %s: %v: %w", path, oneLine(err.Error()), backend.ErrInvalid)
	}
	return path, nil
}

// loadConfig resolves and validates the configuration.
func loadConfig(v *viper.Viper) (*Config, error) {
	file, err := readConfigFile(v)
	if err != nil {
		return nil, err
	}
	c := &Config{File: file}

	c.Output = v.GetString(keyOutput)
	if err := checkOutput(c.Output); err != nil {
		return nil, err
	}
	if c.Timeout, err = durationOf(v, keyTimeout); err != nil {
		return nil, err
	}
	if c.Timeout <= 0 {
		return nil, backend.Errorf(backend.ErrInvalid, "timeout %s: must be positive", c.Timeout)
	}
	if c.HandlerTimeout, err = durationOf(v, keyHandlerTimeout); err != nil {
		return nil, err
	}
	if c.DrainLease, err = durationOf(v, keyDrainLease); err != nil {
		return nil, err
	}
	c.OnUnknown = v.GetString(keyOnUnknown)
	if err := checkOnUnknown(c.OnUnknown); err != nil {
		return nil, err
	}
	if s := strings.TrimSpace(v.GetString(keyPayloadLimit)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxPayloadMax {
			return nil, backend.Errorf(backend.ErrInvalid, "payload_limit %q: want a number of bytes from 0 to %d", s, maxPayloadMax)
		}
		c.PayloadLimit = n
	}
	if cmd := v.GetStringSlice(keyHandlerCommand); len(cmd) > 0 {
		c.HandlerCommand = cmd
	}

	c.Requested = v.GetString(keyPrincipal)
	c.Principal = c.Requested
	if c.Principal == "" {
		c.Principal = osUser()
	}
	if err := backend.ValidateToken("principal", c.Principal); err != nil {
		return nil, err
	}
	switch s := strings.TrimSpace(v.GetString(keyOverride)); s {
	case "", "false":
	case "true":
		c.Override = true
	default:
		return nil, backend.Errorf(backend.ErrInvalid, "principal_override %q: want true or false", s)
	}

	c.Store = v.GetString(keyStore)
	if c.Store == "" {
		p, err := boltstore.DefaultPath()
		if err != nil {
			return nil, fmt.Errorf("default store path: %w", err)
		}
		c.Store = "bbolt://" + filepath.ToSlash(p)
	}
	return c, nil
}

// outputOf resolves only the output format, without reading the config file
// or failing: used to print an error in the right format even when the
// configuration itself is broken.
func outputOf(v *viper.Viper) string {
	if o := v.GetString(keyOutput); checkOutput(o) == nil {
		return o
	}
	return formatText
}

func checkOutput(o string) error {
	switch o {
	case formatText, formatJSON, formatJSONL:
		return nil
	}
	return backend.Errorf(backend.ErrInvalid, "output %q: want text, json or jsonl", o)
}

func checkOnUnknown(s string) error {
	switch s {
	case "pause", "requeue", "interrupt":
		return nil
	}
	return backend.Errorf(backend.ErrInvalid, "on-unknown %q: want pause, requeue or interrupt", s)
}

// durationOf parses a duration setting ("10s", "1m30s"); an empty value is 0.
func durationOf(v *viper.Viper, key string) (time.Duration, error) {
	s := strings.TrimSpace(v.GetString(key))
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, backend.Errorf(backend.ErrInvalid, "%s %q: want a duration such as 10s or 1m30s", key, s)
	}
	return d, nil
}

// osUser is the default principal: the OS user name.
func osUser() string { return boltstore.OSUser() }
