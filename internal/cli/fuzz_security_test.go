package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// FuzzReadBatch: the NDJSON batch reader never panics on any input; every
// line it keeps is either an input or an ErrInvalid naming why, numbered
// within the input's lines.
func FuzzReadBatch(f *testing.F) {
	for _, s := range []string{
		"",
		`{"session":"s1","text":"hi"}` + "\n",
		`{"session":"s1","text":"a"}` + "\n\n" + `{"session":"s2","payload":{"text":"b"}}`,
		`{"session":"s1","producer":"process","identities":["a","b"],"target":"t","text":"x"}` + "\r\n",
		`{"session":"s1","text":"a"} {"session":"s2"}`,
		`{"session":"s1","payload":null,"text":"x","request_id":"r"}`,
		"\xff\xfe{}\n[1,2]\nnull\n\"s\"\n",
		`{"Session":"s1","text":"wrong case"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := readBatch(bytes.NewReader(data), "fuzz")
		if err != nil {
			t.Fatalf("read error on an in-memory reader: %v", err)
		}
		max := bytes.Count(data, []byte("\n")) + 1
		for _, l := range lines {
			if l.n < 1 || l.n > max {
				t.Fatalf("line number %d outside 1..%d", l.n, max)
			}
			if l.err != nil && !errors.Is(l.err, backend.ErrInvalid) {
				t.Fatalf("line %d: error %v is not ErrInvalid", l.n, l.err)
			}
		}
	})
}

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
