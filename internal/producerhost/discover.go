package producerhost

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/hermesq/hermesq/internal/pluginperm"
)

// Prefix names producer plugin binaries: hermesq-producer-NAME.
const Prefix = "hermesq-producer-"

// ValidName reports whether name may be the NAME of hermesq-producer-NAME:
// a lower-case letter or digit, then up to 63 of those, '_' and '-' (the
// language of ^[a-z0-9][a-z0-9_-]{0,63}$). It is written out rather than a
// regular expression compiled at start-up, which every command paid for.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// Setting is the configuration of producer NAME (producers.NAME).
type Setting struct {
	Disabled bool
	SHA256   []byte          // nil: not pinned
	Config   json.RawMessage // the plugin's own settings; nil: none
}

// Spec is one discovered producer plugin.
type Spec struct {
	Name    string
	Path    string
	Enabled bool
	Pin     []byte          // configured SHA-256; nil: not pinned
	Config  json.RawMessage // its own settings, handed over in $HERMESQ_PRODUCER_CONFIG
	Problem string          // why it cannot run (not executable, configured but missing)
}

// Discover lists the hermesq-producer-NAME binaries of dir, with their
// settings. Producers configured in settings whose binary is missing are
// listed with a Problem.
func Discover(dir string, settings map[string]Setting) ([]Spec, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("plugin folder %s: %w", dir, err)
	}
	// A folder writable by group or others could have a binary swapped
	// under us: nothing in it is run.
	if err == nil && runtime.GOOS != "windows" {
		if err := pluginperm.CheckDir(dir); err != nil {
			return nil, err
		}
	}
	var out []Spec
	seen := map[string]bool{}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), Prefix)
		if !ok {
			continue
		}
		if runtime.GOOS == "windows" {
			name = strings.TrimSuffix(name, ".exe")
		}
		if !ValidName(name) {
			continue
		}
		s := settings[name]
		spec := Spec{Name: name, Path: filepath.Join(dir, e.Name()), Enabled: !s.Disabled, Pin: s.SHA256, Config: s.Config}
		fi, err := os.Stat(spec.Path)
		switch {
		case err != nil:
			spec.Problem = err.Error()
		case !fi.Mode().IsRegular():
			spec.Problem = "not a regular file"
		case runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0:
			spec.Problem = "not executable"
		case runtime.GOOS != "windows":
			if err := pluginperm.CheckBinary(spec.Path); err != nil {
				spec.Problem = err.Error()
			}
		}
		seen[name] = true
		out = append(out, spec)
	}
	for name, s := range settings {
		if !seen[name] && !s.Disabled {
			out = append(out, Spec{Name: name, Enabled: true, Pin: s.SHA256,
				Problem: fmt.Sprintf("configured, but %s%s is not in %s", Prefix, name, dir)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// FileSHA256 is the SHA-256 of a file.
func FileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
