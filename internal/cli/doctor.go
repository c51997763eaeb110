package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/pluginperm"
	"github.com/hermesq/hermesq/internal/producerhost"
	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

func newDoctorCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration, the store, plugins and permissions; say how to repair",
		Long: `Doctor checks, and changes nothing:
  config       the configuration resolves (file, environment, flags)
  store        the store opens; bbolt: file and folder modes, schema version,
               free pages, every page's consistency; Redis: the server, the
               session index and orphaned lookups
  principal    who the store says is calling, and the principal acted as
  plugins      plugin folders and binaries are writable by no one but
               their owner; with plugins installed, hermesq-producers (which
               producers run needs) is beside hermesq or on PATH
  top view     hermesq-top (which top needs) is beside hermesq or on PATH
               (a warning when not)
Each check prints ok, warn or fail with what it saw, and for what is not ok
how to repair it. Exit 0 when nothing failed (warnings included), else 1. A
corrupt or truncated store file is reported here, never re-created.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDoctor(cmd.Context(), f)
		},
	}
}

func runDoctor(ctx context.Context, f *Factory) error {
	var out []backend.Finding
	add := func(check, status, detail, repair string) {
		out = append(out, backend.Finding{Check: check, Status: status, Detail: termtext.OneLine(detail), Repair: repair})
	}
	p := &printer{ios: f.IO, format: f.output()}
	cfg, err := f.Config()
	if err != nil {
		add("config", backend.FindingFail, err.Error(), "fix the setting named (config file, HERMESQ_* environment or flag)")
		return doctorReport(p, out)
	}
	file := cfg.File
	if file == "" {
		file = "no config file"
	}
	add("config", backend.FindingOK, file, "")

	// The store is opened here, not through the factory: doctor reports a
	// refused principal as a finding rather than stopping at it.
	sctx, cancel := context.WithTimeout(ctx, cfg.Timeout+timeoutSlack)
	defer cancel()
	st, err := f.Registry.Open(sctx, cfg.Store, backend.Options{Timeout: cfg.Timeout})
	if err != nil {
		repair := "check the store URL, the server and the credentials"
		if strings.Contains(err.Error(), "corrupt") {
			repair = "restore the store file from a backup or an export; hermesq never re-creates it"
		}
		add("store", backend.FindingFail, err.Error(), repair)
		doctorStateDir(add, cfg)
		return doctorReport(p, out)
	}
	defer st.Close()
	add("store", backend.FindingOK, "opens: "+redactURL(cfg.Store), "")
	if d, ok := st.(backend.Doctor); ok {
		fs, err := d.Doctor(sctx)
		for _, fd := range fs {
			add(fd.Check, fd.Status, fd.Detail, fd.Repair)
		}
		if err != nil {
			add("store check", backend.FindingFail, err.Error(), "see the message; a corrupt file is restored from a backup or an export")
		}
	}
	pc := *cfg
	if err := resolvePrincipal(sctx, st, &pc); err != nil {
		add("principal", backend.FindingFail, err.Error(), "act as yourself (drop --principal), or have an admin grant the right")
	} else {
		how := "not authenticated by the store"
		if pc.Authenticated {
			how = "authenticated by the store"
		}
		if pc.Caller == "" {
			how = "Redis's default user: no principal is protected"
		}
		if pc.Admin {
			how += ", admin"
		}
		add("principal", backend.FindingOK, fmt.Sprintf("%s (%s)", pc.Principal, how), "")
	}
	doctorStateDir(add, cfg)
	if pc, err := f.producerConfig(); err != nil {
		add("plugins", backend.FindingFail, err.Error(), "fix the producer settings")
	} else {
		if plugins := doctorPluginDir(add, pc); plugins > 0 {
			doctorSibling(add, "producer host", ProducersBinary, f.Launch != nil, backend.FindingFail)
		}
	}
	doctorSibling(add, "top view", TopBinary, f.Top != nil, backend.FindingWarn)
	return doctorReport(p, out)
}

// timeoutSlack is added to the store timeout for doctor's whole store check.
const timeoutSlack = 30 * time.Second

// redactURL is a store URL without its password.
func redactURL(s string) string { return backend.Redact(s) }

// doctorStateDir checks the folder of a bbolt store in the default place.
func doctorStateDir(add func(check, status, detail, repair string), cfg *Config) {
	p, err := boltstore.DefaultPath()
	if err != nil {
		return
	}
	dir := filepath.Dir(p)
	fi, err := os.Stat(dir)
	if err != nil {
		return
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		add("state folder mode", backend.FindingWarn, fmt.Sprintf("%s has mode %04o", dir, m), "chmod 700 "+dir)
	} else {
		add("state folder mode", backend.FindingOK, fmt.Sprintf("%s has mode %04o", dir, m), "")
	}
}

// doctorPluginDir checks a plugin folder and every binary in it (its mode,
// and its checksum against its pin), and returns how many plugin binaries
// it holds.
func doctorPluginDir(add func(check, status, detail, repair string), pc *ProducerConfig) (plugins int) {
	dir := pc.PluginDir
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		add("plugin folder", backend.FindingOK, dir+" does not exist (no plugins)", "")
		return 0
	}
	if err := pluginperm.CheckDir(dir); err != nil {
		add("plugin folder", backend.FindingFail, err.Error(), "chmod 700 "+dir)
		return 0
	}
	add("plugin folder", backend.FindingOK, dir, "")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "hermesq-producer-") {
			continue
		}
		plugins++
		bin := filepath.Join(dir, e.Name())
		if err := pluginperm.CheckBinary(bin); err != nil {
			add("plugin binary", backend.FindingFail, err.Error(), "chmod 700 "+bin)
			continue // never run
		}
		add("plugin binary", backend.FindingOK, bin, "")
		name := strings.TrimPrefix(e.Name(), "hermesq-producer-")
		s := pc.Plugins[name]
		if s.SHA256 != nil && !doctorPin(add, name, bin, s.SHA256) {
			continue // never run
		}
		if !s.Disabled && producerhost.ValidName(name) {
			doctorPluginConfig(add, pc, name, bin, s.Config)
		}
	}
	return plugins
}

// doctorPin checks a plugin binary's checksum against its pin, and shows
// the binary's own when they differ. It reports whether they match.
func doctorPin(add func(check, status, detail, repair string), name, bin string, pin []byte) bool {
	sum, err := producerhost.FileSHA256(bin)
	switch {
	case err != nil:
		add("plugin pin", backend.FindingFail, fmt.Sprintf("%s: %v", bin, err), "")
	case !bytes.Equal(sum, pin):
		add("plugin pin", backend.FindingFail,
			fmt.Sprintf("%s has sha256 %x, not the pinned %x: producers run refuses to start it", bin, sum, pin),
			fmt.Sprintf("if this binary is the one to trust, set producers.%s.sha256: \"%x\"", name, sum))
	default:
		add("plugin pin", backend.FindingOK, fmt.Sprintf("%s matches its pin %x", bin, pin), "")
		return true
	}
	return false
}

// pluginCheckTimeout bounds a plugin's configuration check.
const pluginCheckTimeout = 10 * time.Second

// doctorPluginConfig has plugin name check its own configuration: the
// binary runs as producers run would start it (no shell, none of hermesq's
// environment but PATH, HOME, LANG, LC_ALL, TZ and TMPDIR, its settings in
// HERMESQ_PRODUCER_CONFIG) with HERMESQ_PRODUCER_CHECK=1 and a scratch
// state folder, and exits with its verdict (producer.Check) without
// serving. A configuration it refuses (a watch of a FIFO, say) fails with
// the plugin's reason; a plugin built without the check is a warning.
func doctorPluginConfig(add func(check, status, detail, repair string), pc *ProducerConfig, name, bin string, config []byte) {
	scratch, err := os.MkdirTemp("", "hermesq-doctor-")
	if err != nil {
		add("plugin config", backend.FindingWarn, fmt.Sprintf("%s: not checked: %v", name, err), "")
		return
	}
	defer os.RemoveAll(scratch)
	ctx, cancel := context.WithTimeout(context.Background(), pluginCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, producer.EnvName+"="+name, producer.EnvStateDir+"="+scratch, producer.EnvCheck+"=1")
	if config != nil {
		cmd.Env = append(cmd.Env, producer.EnvConfig+"="+string(config))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	last := strings.TrimSpace(out.String())
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	switch {
	case err == nil:
		add("plugin config", backend.FindingOK, name+": accepted by the plugin", "")
	case ctx.Err() != nil:
		add("plugin config", backend.FindingWarn, fmt.Sprintf("%s: the plugin did not answer the configuration check within %s", name, pluginCheckTimeout), "")
	case strings.Contains(out.String(), "This binary is a plugin"):
		add("plugin config", backend.FindingWarn, name+": the plugin cannot check its configuration (built without producer.Check)", "")
	default:
		if !strings.HasPrefix(last, name+":") {
			last = name + ": " + last
		}
		add("plugin config", backend.FindingFail, termtext.OneLine(last), "fix producers."+name+".config")
	}
}

// doctorSibling checks that the sibling binary name, which a command hands
// itself to, can be found (self: this binary is it); missing is a finding
// of status missing.
//
// hermesq-producers is a failure when producer plugins are installed;
// hermesq-top, a warning: only `hermesq top` needs it.
func doctorSibling(add func(check, status, detail, repair string), check, name string, self bool, missing string) {
	if self {
		add(check, backend.FindingOK, "this binary is "+name, "")
		return
	}
	p, err := siblingPath(name)
	if err != nil {
		add(check, missing, err.Error(), "put "+name+" beside hermesq or on PATH")
		return
	}
	add(check, backend.FindingOK, p, "")
}

// doctorReport prints the findings; any failure is exit 1 with one error
// line naming the failed checks.
func doctorReport(p *printer, out []backend.Finding) error {
	err := list(p, out, func(w io.Writer) error {
		for _, fd := range out {
			if _, err := fmt.Fprintf(w, "%-5s %-18s %s\n", fd.Status, fd.Check, termtext.Esc(fd.Detail)); err != nil {
				return err
			}
			if fd.Repair != "" {
				if _, err := fmt.Fprintf(w, "      %-18s repair: %s\n", "", termtext.Esc(fd.Repair)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var failed []string
	for _, fd := range out {
		if fd.Status == backend.FindingFail {
			failed = append(failed, fd.Check)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("doctor: %d checks failed (%s): see the report on stdout: %w", len(failed), strings.Join(failed, ", "), backend.ErrInternal)
	}
	return nil
}
