package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/hermesq/hermesq/internal/termtext"
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
	// Warnings are about the config file (unknown keys): printed on stderr
	// once, never fatal.
	Warnings []string
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
// or the default one when it exists, into v, and returns its name and
// contents. A named file that cannot be read, or is larger than
// backend.MaxUserFile (--config /dev/zero), is an error; a missing default
// file is not.
func readConfigFile(v *viper.Viper) (string, []byte, error) {
	path := v.GetString(keyConfig)
	if path == "" {
		path = defaultConfigFile()
		if path == "" {
			return "", nil, nil
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return "", nil, nil
		}
	}
	data, err := backend.ReadFileLimit("config file", path, backend.MaxUserFile)
	if errors.Is(err, backend.ErrInvalid) {
		return "", nil, err
	}
	if err == nil {
		err = parseConfig(v, path, data)
	}
	if err != nil {
		return "", nil, fmt.Errorf("config file %s: %v: %w", path, termtext.OneLine(err.Error()), backend.ErrInvalid)
	}
	return path, data, nil
}

// parseConfig reads data, the contents of the config file path, into v:
// YAML unless the name says another format viper knows.
func parseConfig(v *viper.Viper, path string, data []byte) error {
	typ := strings.TrimPrefix(filepath.Ext(path), ".")
	if typ == "" {
		typ = "yaml"
	}
	v.SetConfigType(typ)
	return v.ReadConfig(bytes.NewReader(data))
}

// loadConfig resolves and validates the configuration.
func loadConfig(v *viper.Viper) (*Config, error) {
	file, data, err := readConfigFile(v)
	if err != nil {
		return nil, err
	}
	c := &Config{File: file}
	if file != "" {
		// The file's own values, whatever flags and environment say: a
		// broken config file is refused even when a flag overrides it.
		fv := viper.New()
		if err := parseConfig(fv, file, data); err == nil {
			c.Warnings = unknownKeys(fv, file)
			if err := checkSettingTypes(fv, "config file "+file+": "); err != nil {
				return nil, err
			}
		}
	}
	if err := checkSettingTypes(v, ""); err != nil {
		return nil, err
	}

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
	if v.IsSet(keyDrainLease) && c.DrainLease < minLease {
		// 0 is not "the default": leave the setting out for that.
		return nil, backend.Errorf(backend.ErrInvalid, "drain lease %s: must be at least %s (leave it unset for the default %s)",
			c.DrainLease, minLease, backend.DefaultLeaseTTL)
	}
	c.OnUnknown = v.GetString(keyOnUnknown)
	if err := checkOnUnknown(c.OnUnknown); err != nil {
		return nil, err
	}
	if s := strings.TrimSpace(v.GetString(keyPayloadLimit)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPayloadMax {
			return nil, backend.Errorf(backend.ErrInvalid, "payload_limit %q: want a number of bytes from 1 to %d", s, maxPayloadMax)
		}
		c.PayloadLimit = n
	}
	if c.HandlerCommand, err = handlerCommand(v); err != nil {
		return nil, err
	}

	c.Requested = v.GetString(keyPrincipal)
	c.Principal = c.Requested
	if c.Principal == "" {
		c.Principal = osUser()
	}
	if err := backend.ValidatePrincipal(c.Principal); err != nil {
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

// minLease is the shortest drain or viewer lease (admission.MinLease).
const minLease = 100 * time.Millisecond

// checkSettingTypes refuses a setting given explicitly but empty (--store
// ”, principal: ""), which would otherwise fall back to a default, and a
// config file value of the wrong type (a list where a string is wanted),
// which viper would read as empty. Each error names the setting.
func checkSettingTypes(v *viper.Viper, where string) error {
	for _, k := range configKeys {
		if k == keyHandlerCommand || !v.IsSet(k) {
			continue
		}
		switch val := v.Get(k).(type) {
		case string:
			if strings.TrimSpace(val) == "" {
				return backend.Errorf(backend.ErrInvalid, "%ssetting %s is empty (%s): give a value, or leave it unset for the default", where, k, settingSources(k))
			}
		case int, int64, uint64, float64, bool, time.Duration:
			if k == keyStore || k == keyPrincipal || k == keyOutput || k == keyOnUnknown || k == keyConfig {
				return backend.Errorf(backend.ErrInvalid, "%ssetting %s is %T %v: want a string", where, k, val, val)
			}
		default:
			return backend.Errorf(backend.ErrInvalid, "%ssetting %s is a %s: want a single value", where, k, kindName(val))
		}
	}
	return nil
}

func settingSources(k string) string {
	return fmt.Sprintf("flag --%s, %s or the config file", strings.ReplaceAll(k, ".", "-"), envName(k))
}

func kindName(v any) string {
	switch v.(type) {
	case []any, []string:
		return "list"
	case map[string]any:
		return "map"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// handlerCommand reads handler.command: a list of strings in the config
// file, a JSON list in HERMESQ_HANDLER_COMMAND. A single string is refused,
// never split on spaces: the handler is an argv, never a shell command.
func handlerCommand(v *viper.Viper) ([]string, error) {
	if !v.IsSet(keyHandlerCommand) {
		return nil, nil
	}
	var argv []string
	if env := os.Getenv(envName(keyHandlerCommand)); env != "" {
		if err := json.Unmarshal([]byte(env), &argv); err != nil {
			return nil, backend.Errorf(backend.ErrInvalid, "%s: want a JSON list of strings such as [\"./agent.sh\",\"--fast\"] (it is never split or run by a shell)", envName(keyHandlerCommand))
		}
	} else {
		switch val := v.Get(keyHandlerCommand).(type) {
		case []any:
			for _, w := range val {
				s, ok := w.(string)
				if !ok {
					return nil, backend.Errorf(backend.ErrInvalid, "handler.command: element %v is not a string", w)
				}
				argv = append(argv, s)
			}
		case []string:
			argv = val
		default:
			return nil, backend.Errorf(backend.ErrInvalid, "handler.command is a %s: want a list of strings such as [./agent.sh, --fast] (it is never split or run by a shell)", kindName(val))
		}
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, backend.Errorf(backend.ErrInvalid, "handler.command is empty: give the program and its arguments, or leave it unset")
	}
	return argv, nil
}

// unknownKeys lists the config file's keys hermesq does not know, as
// warnings (a misspelled key would otherwise be ignored without a word).
func unknownKeys(v *viper.Viper, file string) []string {
	known := map[string]bool{}
	for _, k := range append(append([]string{}, configKeys...), producerEnvKeys...) {
		known[k] = true
	}
	var out []string
	for _, k := range v.AllKeys() {
		// producers.NAME.… is the producers' own part: checked where it is
		// read (producer settings), and config is the plugin's to define.
		if known[k] || strings.HasPrefix(k, keyProducers+".") {
			continue
		}
		out = append(out, fmt.Sprintf("config file %s: unknown key %q is ignored (known: %s, %s, producers.NAME…)",
			file, k, strings.Join(configKeys[1:], ", "), strings.Join(producerEnvKeys, ", ")))
	}
	sort.Strings(out)
	return out
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
