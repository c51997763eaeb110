package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/hermesq/hermesq/internal/producerhost"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// Producer configuration keys (flag > HERMESQ_* environment > config file >
// default, like every setting).
const (
	keyPluginDir            = "plugin_dir"             // folder of hermesq-producer-NAME binaries
	keyProducerStateDir     = "producer_state_dir"     // plugin NAME keeps its outbox in producer_state_dir/NAME
	keyProducerLease        = "producer_lease"         // claim lease of the plugins' outboxes
	keyProducerStartTimeout = "producer_start_timeout" // how long a plugin may take to answer the handshake
	keyProducerPoll         = "producer_poll"          // wait between polls of an idle plugin
	keyProducerPollDeadline = "producer_poll_deadline" // bound on one Poll of a plugin
	keyProducerSettleDL     = "producer_settle_deadline"
	keyProducerBackoff      = "producer_backoff"     // wait after an event's first refusal, doubling
	keyProducerBackoffCap   = "producer_backoff_cap" // the longest wait between offers of a refused event
	keyProducerMaxAge       = "producer_max_age"     // operator's age limit of pending events; none by default
	keyProducerWaitCrit     = "producer_wait_crit"   // check: critical when an event waited longer after a refusal
	keyProducers            = "producers"            // producers.NAME.{enabled,sha256,config}

	defaultProducerStartTimeout = producerhost.DefaultStartTimeout
	defaultProducerPoll         = producerhost.DefaultPoll
	defaultProducerWaitCrit     = time.Hour

	// pluginPrefix names producer plugin binaries: hermesq-producer-NAME.
	pluginPrefix = producerhost.Prefix
)

var producerEnvKeys = []string{keyPluginDir, keyProducerStateDir, keyProducerLease, keyProducerStartTimeout, keyProducerPoll,
	keyProducerPollDeadline, keyProducerSettleDL, keyProducerBackoff, keyProducerBackoffCap, keyProducerMaxAge, keyProducerWaitCrit}

// bindProducerEnv binds the producer settings to their HERMESQ_* variables.
func bindProducerEnv(v *viper.Viper) {
	for _, k := range producerEnvKeys {
		_ = v.BindEnv(k, envName(k))
	}
}

// ProducerConfig is the resolved producer configuration.
type ProducerConfig struct {
	PluginDir    string
	StateDir     string
	Lease        time.Duration // 0: the plugins' default (5m)
	StartTimeout time.Duration
	Poll         time.Duration
	// PollDeadline, SettleDeadline bound each plugin call (0: 30 s);
	// Backoff, BackoffCap space the offers of a refused event (0: 1 s
	// doubling to 5 m); MaxAge is the operator's age limit of pending
	// events (0: none); WaitCrit makes check critical (1 h).
	PollDeadline, SettleDeadline time.Duration
	Backoff, BackoffCap          time.Duration
	MaxAge, WaitCrit             time.Duration
	Plugins                      map[string]pluginSetting // by name, from producers.NAME
}

// hostConfig is the producer host's configuration.
func (pc *ProducerConfig) hostConfig() producerhost.Config {
	return producerhost.Config{
		StateDir:       pc.StateDir,
		Lease:          pc.Lease,
		MaxAge:         pc.MaxAge,
		StartTimeout:   pc.StartTimeout,
		Poll:           pc.Poll,
		PollDeadline:   pc.PollDeadline,
		SettleDeadline: pc.SettleDeadline,
		Backoff:        producerhost.Backoff{Base: pc.Backoff, Cap: pc.BackoffCap},
	}
}

// hostSettings is the producers.NAME settings as the host takes them.
func (pc *ProducerConfig) hostSettings() map[string]producerhost.Setting {
	m := make(map[string]producerhost.Setting, len(pc.Plugins))
	for name, s := range pc.Plugins {
		m[name] = producerhost.Setting{Disabled: s.Disabled, SHA256: s.SHA256, Config: s.Config}
	}
	return m
}

type pluginSetting struct {
	Disabled bool
	SHA256   []byte          // nil: not pinned
	Config   json.RawMessage // the plugin's own settings (producers.NAME.config) as JSON; nil: none
}

// producerConfig resolves the producer settings (after Config, which reads
// the config file), the plugins' own (producers.NAME) included: for the
// producers commands and doctor, which start or check the plugins.
func (f *Factory) producerConfig() (*ProducerConfig, error) {
	pc, err := f.producerPaths()
	if err != nil {
		return nil, err
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	if err := readPluginSettings(f.v, cfg.File, pc); err != nil {
		return nil, err
	}
	return pc, nil
}

// producerPaths resolves the producer settings that commands recording
// events need (the folders, the lease), without the plugins' own settings:
// a mistake in producers.NAME concerns the plugins and fails only the
// commands that start or check them (producers …, doctor), never
// delegate done or proc run, whose events wait in their outbox meanwhile.
func (f *Factory) producerPaths() (*ProducerConfig, error) {
	if _, err := f.Config(); err != nil {
		return nil, err
	}
	v := f.v
	pc := &ProducerConfig{Plugins: map[string]pluginSetting{}}
	var err error
	if pc.PluginDir, err = dirSetting(v, keyPluginDir, "XDG_DATA_HOME", filepath.Join(".local", "share"), "plugins"); err != nil {
		return nil, err
	}
	if pc.StateDir, err = dirSetting(v, keyProducerStateDir, "XDG_STATE_HOME", filepath.Join(".local", "state"), "producers"); err != nil {
		return nil, err
	}
	if pc.Lease, err = durationOf(v, keyProducerLease); err != nil {
		return nil, err
	}
	if pc.StartTimeout, err = durationOf(v, keyProducerStartTimeout); err != nil {
		return nil, err
	}
	if pc.StartTimeout == 0 {
		pc.StartTimeout = defaultProducerStartTimeout
	}
	if pc.Poll, err = durationOf(v, keyProducerPoll); err != nil {
		return nil, err
	}
	if pc.Poll == 0 {
		pc.Poll = defaultProducerPoll
	}
	for _, d := range []struct {
		key string
		to  *time.Duration
	}{
		{keyProducerPollDeadline, &pc.PollDeadline}, {keyProducerSettleDL, &pc.SettleDeadline},
		{keyProducerBackoff, &pc.Backoff}, {keyProducerBackoffCap, &pc.BackoffCap},
		{keyProducerMaxAge, &pc.MaxAge}, {keyProducerWaitCrit, &pc.WaitCrit},
	} {
		if *d.to, err = durationOf(v, d.key); err != nil {
			return nil, err
		}
	}
	if pc.PollDeadline == 0 {
		pc.PollDeadline = producerhost.DefaultPollDeadline
	}
	if pc.SettleDeadline == 0 {
		pc.SettleDeadline = producerhost.DefaultSettleDeadline
	}
	if pc.Backoff == 0 {
		pc.Backoff = producerhost.DefaultBackoff.Base
	}
	if pc.BackoffCap == 0 {
		pc.BackoffCap = max(producerhost.DefaultBackoff.Cap, pc.Backoff)
	}
	if pc.BackoffCap < pc.Backoff {
		return nil, backend.Errorf(backend.ErrInvalid, "%s %s is shorter than %s %s", keyProducerBackoffCap, pc.BackoffCap, keyProducerBackoff, pc.Backoff)
	}
	if pc.WaitCrit == 0 {
		pc.WaitCrit = defaultProducerWaitCrit
	}
	return pc, nil
}

// readPluginSettings reads producers.NAME into pc.Plugins; file is the
// config file read ("" for none), whose text a pin is taken from.
func readPluginSettings(v *viper.Viper, file string, pc *ProducerConfig) error {
	raw := v.GetStringMap(keyProducers)
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !producerhost.ValidName(name) {
			return backend.Errorf(backend.ErrInvalid, "producers.%s: not a producer name (lower-case letters, digits, - and _)", name)
		}
		sub, ok := raw[name].(map[string]any)
		if !ok {
			return backend.Errorf(backend.ErrInvalid, "producers.%s: want a map with enabled, sha256 and config", name)
		}
		var s pluginSetting
		for k, val := range sub {
			switch strings.ToLower(k) {
			case "enabled":
				b, ok := val.(bool)
				if !ok {
					return backend.Errorf(backend.ErrInvalid, "producers.%s.enabled: want true or false", name)
				}
				s.Disabled = !b
			case "sha256":
				sum, err := pinOf(val, file, name, k)
				if err != nil {
					return err
				}
				s.SHA256 = sum
			case "config":
				if _, ok := val.(map[string]any); !ok {
					return backend.Errorf(backend.ErrInvalid, "producers.%s.config: want a map (the plugin's own settings)", name)
				}
				b, err := json.Marshal(val)
				if err != nil {
					return backend.Errorf(backend.ErrInvalid, "producers.%s.config: %v", name, err)
				}
				s.Config = b
			default:
				return backend.Errorf(backend.ErrInvalid, "producers.%s.%s: unknown setting (want enabled, sha256 or config)", name, k)
			}
		}
		pc.Plugins[name] = s
	}
	return nil
}

// pinOf reads a producers.NAME.sha256 pin. YAML reads an unquoted pin made
// only of digits (0000…0000, 1234…) as a number, which loses its digits:
// such a pin is taken from the config file's own text instead, so it works
// quoted or not.
func pinOf(val any, file, name, key string) ([]byte, error) {
	str, ok := val.(string)
	if !ok {
		str, ok = rawYAMLScalar(file, keyProducers, name, key)
	}
	str = strings.TrimSpace(str)
	sum, err := hex.DecodeString(str)
	if !ok || err != nil || len(sum) != 32 {
		got := fmt.Sprintf("%q", str)
		if !ok {
			got = fmt.Sprintf("%v", val)
		}
		return nil, backend.Errorf(backend.ErrInvalid, "producers.%s.sha256 %s: want 64 hex digits, the binary's sha256sum (quote it: sha256: \"…\")", name, got)
	}
	return sum, nil
}

// rawYAMLScalar returns the text of the scalar at path (keys compared
// without case, as viper does) in YAML file, as written.
func rawYAMLScalar(file string, path ...string) (string, bool) {
	if file == "" {
		return "", false
	}
	b, err := backend.ReadFileLimit("config file", file, backend.MaxUserFile)
	if err != nil {
		return "", false
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) != 1 {
		return "", false
	}
	n := doc.Content[0]
	for _, k := range path {
		if n.Kind != yaml.MappingNode {
			return "", false
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if strings.EqualFold(n.Content[i].Value, k) {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return "", false
		}
		n = next
	}
	if n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

// dirSetting is an absolute folder from key, or $XDG/hermesq/sub with XDG
// defaulting to ~/def.
func dirSetting(v *viper.Viper, key, xdg, def, sub string) (string, error) {
	if d := v.GetString(key); d != "" {
		if !filepath.IsAbs(d) {
			return "", backend.Errorf(backend.ErrInvalid, "%s %q: want an absolute path", key, d)
		}
		return filepath.Clean(d), nil
	}
	base := os.Getenv(xdg)
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", backend.Errorf(backend.ErrInvalid, "%s: no home folder to default to: %v", key, err)
		}
		base = filepath.Join(home, def)
	}
	return filepath.Join(base, "hermesq", sub), nil
}

// pluginStateDir is plugin name's own state folder.
func (pc *ProducerConfig) pluginStateDir(name string) string {
	return filepath.Join(pc.StateDir, name)
}

// outbox opens plugin name's outbox, as the commands that add events to it
// (delegate done, proc run) and producers ls/outbox do. A locked outbox is
// ErrUnavailable (exit 75).
func (f *Factory) outbox(name string) (*producer.Outbox, error) {
	pc, err := f.producerPaths()
	if err != nil {
		return nil, err
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	ob, err := producer.OpenOutbox(pc.pluginStateDir(name), producer.OutboxOptions{LockWait: cfg.Timeout, Lease: pc.Lease, MaxAge: pc.MaxAge})
	if err != nil {
		return nil, outboxError(err)
	}
	return ob, nil
}

// outboxError maps an outbox failure to the contract's errors.
func outboxError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, producer.ErrLocked):
		return fmt.Errorf("%w: %w", err, backend.ErrUnavailable)
	case errors.Is(err, producer.ErrNoEvent):
		return fmt.Errorf("%w: %w", err, backend.ErrNotFound)
	case errors.Is(err, producer.ErrInvalidEvent):
		return fmt.Errorf("%w: %w", err, backend.ErrInvalid)
	}
	return err
}
