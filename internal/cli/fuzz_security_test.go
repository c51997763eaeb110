package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// FuzzConfig: any config file content is read into a valid configuration
// or refused with ErrInvalid, never a panic; a setting refused is never
// replaced by a default.
func FuzzConfig(f *testing.F) {
	for _, s := range []string{
		"",
		"principal: alice\noutput: json\n",
		"timeout: 0s\n",
		"timeout: [1, 2]\n",
		"handler:\n  command: [./agent.sh, --fast]\n  timeout: 10s\n",
		"drain:\n  on_unknown: requeue\n  lease: 1m\n",
		"payload_limit: 99999999999\n",
		"principal_override: maybe\n",
		"store: redis://u:p@h:1/0?prefix=x\n",
		"plugin_dir: relative\nproducers:\n  watch:\n    enabled: false\n",
		"output: {a: b}\n",
		"\t- not yaml: [",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		v := newViper()
		v.Set(keyConfig, path)
		cfg, err := loadConfig(v)
		if err != nil {
			if !errors.Is(err, backend.ErrInvalid) {
				t.Fatalf("config error %v is not ErrInvalid", err)
			}
			return
		}
		if cfg.Timeout <= 0 || checkOutput(cfg.Output) != nil || checkOnUnknown(cfg.OnUnknown) != nil {
			t.Fatalf("accepted a configuration that makes no sense: %+v", cfg)
		}
		if cfg.PayloadLimit < 0 || cfg.PayloadLimit > backend.MaxPayloadLimit {
			t.Fatalf("payload limit %d accepted", cfg.PayloadLimit)
		}
		if err := backend.ValidateToken("principal", cfg.Principal); err != nil {
			t.Fatalf("principal %q accepted: %v", cfg.Principal, err)
		}
	})
}
