package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Each top-level command is named as its entry of the table, which
// NewRootCmdFor finds it by, and has no alias it could be called by.
func TestCommandsTableNames(t *testing.T) {
	f := NewFactory(System())
	for _, c := range commands {
		if got := c.build(f); got.Name() != c.name || len(got.Aliases) > 0 {
			t.Errorf("the command of table entry %q is named %q (aliases %q)", c.name, got.Name(), got.Aliases)
		}
	}
}

// NewRootCmdFor builds the named top-level command alone, and a command
// line runs, prints its help, its completions and its errors exactly as
// in the whole tree; anything that names no command (the root's help and
// flags, help topics, completion, a mistyped command) gets the whole tree.
func TestRootForRunsAsTheWholeTree(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	e.ok("admit", "s1", "--text", "hello", "--request-id", "r1")
	cases := []struct {
		args  []string
		alone bool // the named command alone is built
	}{
		{[]string{"admit", "s1", "--text", "hello", "--request-id", "r1"}, true}, // a duplicate: the same result
		{[]string{"admit", "--help"}, true},
		{[]string{"admit"}, true},
		{[]string{"admit", "s1", "--bogus"}, true},
		{[]string{"-o", "json", "session", "show", "s1"}, true},
		{[]string{"--timeout", "5s", "-o", "jsonl", "queue", "s1"}, true},
		{[]string{"--output=json", "sessions"}, true},
		{[]string{"session"}, true},
		{[]string{"session", "--help"}, true},
		{[]string{"session", "bogus"}, true},
		{[]string{"drain", "--help"}, true},
		{[]string{"show"}, true},
		{[]string{"show", "nosuch"}, true},
		{[]string{"admit", "s1", "--text", ""}, true},
		{[]string{"--store", "bogus://x", "sessions"}, true},
		{[]string{"version"}, true},
		{[]string{"producers", "ls", "--help"}, true},
		{[]string{"admti", "s1"}, false},
		{[]string{"help", "admit"}, false},
		{[]string{"help", "limits"}, false},
		{[]string{"--help"}, false},
		{[]string{"--version"}, false},
		{[]string{}, false},
		{[]string{"--bogus", "admit", "s1"}, false},
		{[]string{"--", "admit", "s1"}, false},
		{[]string{"-o", "admit", "sessions"}, true},
		{[]string{"completion", "bash"}, false},
		{[]string{"__complete", "adm"}, false},
		{[]string{"__complete", "admit", "--"}, false},
		{[]string{"__complete", "-o", ""}, false},
	}
	for _, c := range cases {
		e.partial = false
		whole := e.run(c.args...)
		e.partial = true
		got := e.run(c.args...)
		if d := cmp.Diff(whole, got, cmp.AllowUnexported(result{})); d != "" {
			t.Errorf("hermesq %q differs with the tree NewRootCmdFor builds (-whole +built):\n%s", c.args, d)
		}
		if alone := e.built == 1; alone != c.alone {
			t.Errorf("hermesq %q: built %d top-level commands, want the named one alone: %v", c.args, e.built, c.alone)
		}
	}
	if !slices.ContainsFunc(cases, func(c struct {
		args  []string
		alone bool
	}) bool {
		return c.alone
	}) {
		t.Fatal("no case builds a command alone")
	}
}

// A command built alone resolves its configuration as in the whole tree:
// a setting other commands bind to their flags (drain's lease, handler
// timeout and on-unknown, producers' plugin folder) has, unbound, the
// same default, and the environment and the config file set it alike.
func TestRootForResolvesTheSameConfig(t *testing.T) {
	e := newEnv(t)
	file := "drain:\n  lease: 45s\n  on_unknown: requeue\nhandler:\n  timeout: 5s\n  command: [\"true\"]\nplugin_dir: /opt/plugins\n"
	for _, setup := range []struct {
		name string
		env  map[string]string
		file string
	}{
		{"defaults", nil, ""},
		{"environment", map[string]string{envName(keyDrainLease): "2m", envName(keyHandlerTimeout): "9s",
			envName(keyOnUnknown): "interrupt", envName(keyPluginDir): "/srv/plugins"}, ""},
		{"config file", nil, file},
	} {
		t.Run(setup.name, func(t *testing.T) {
			for k, v := range setup.env {
				t.Setenv(k, v)
			}
			cfgFile := filepath.Join(e.dir, "config", "hermesq", "config.yaml")
			if err := os.MkdirAll(filepath.Dir(cfgFile), 0o700); err != nil {
				t.Fatal(err)
			}
			if setup.file != "" {
				if err := os.WriteFile(cfgFile, []byte(setup.file), 0o600); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Remove(cfgFile) })
			}
			type resolved struct {
				Config   *Config
				Producer *ProducerConfig
				Errs     string
			}
			resolve := func(f *Factory) resolved {
				c, err := f.Config()
				p, perr := f.producerConfig()
				return resolved{c, p, fmt.Sprint(err, perr)}
			}
			whole := NewFactory(System())
			NewRootCmd(whole)
			want := resolve(whole)
			if want.Errs != "<nil> <nil>" {
				t.Fatalf("the whole tree's configuration: %s", want.Errs)
			}
			if setup.name != "defaults" && (want.Config.DrainLease == 0 || want.Config.OnUnknown == "pause" || want.Producer.PluginDir == "") {
				t.Fatalf("the %s did not set the configuration: %+v", setup.name, want)
			}
			for _, c := range commands {
				alone := NewFactory(System())
				if root := NewRootCmdFor(alone, []string{"--store", e.store, c.name}); len(root.Commands()) != 1 {
					t.Fatalf("%s: built %d commands, want it alone", c.name, len(root.Commands()))
				}
				if d := cmp.Diff(want, resolve(alone)); d != "" {
					t.Errorf("%s alone resolves another configuration than the whole tree (-whole +alone):\n%s", c.name, d)
				}
			}
		})
	}
}
