package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hermesq/hermesq/internal/pluginperm"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// pollMax is how many events the host takes from a plugin in one poll: one
// admission batch, one store round-trip.
const pollMax = 256

// onceStarts bounds how often producers run --once starts a plugin that
// crashes or hangs before it has delivered everything.
const onceStarts = 3

// pluginSpec is one discovered producer plugin.
type pluginSpec struct {
	Name    string
	Path    string
	Enabled bool
	Pin     []byte          // configured SHA-256; nil: not pinned
	Config  json.RawMessage // its own settings, handed over in $HERMESQ_PRODUCER_CONFIG
	Problem string          // why it cannot run (not executable, configured but missing)
}

// discoverPlugins lists the hermesq-producer-NAME binaries of dir, with
// their settings. Producers configured under producers.NAME whose binary is
// missing are listed with a Problem.
func discoverPlugins(pc *ProducerConfig) ([]pluginSpec, error) {
	entries, err := os.ReadDir(pc.PluginDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("plugin folder %s: %w", pc.PluginDir, err)
	}
	// A folder writable by group or others could have a binary swapped
	// under us: nothing in it is run.
	if err == nil && runtime.GOOS != "windows" {
		if err := pluginperm.CheckDir(pc.PluginDir); err != nil {
			return nil, err
		}
	}
	var out []pluginSpec
	seen := map[string]bool{}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), pluginPrefix)
		if !ok {
			continue
		}
		if runtime.GOOS == "windows" {
			name = strings.TrimSuffix(name, ".exe")
		}
		if !producerName.MatchString(name) {
			continue
		}
		s := pc.Plugins[name]
		spec := pluginSpec{Name: name, Path: filepath.Join(pc.PluginDir, e.Name()), Enabled: !s.Disabled, Pin: s.SHA256, Config: s.Config}
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
	for name, s := range pc.Plugins {
		if !seen[name] && !s.Disabled {
			out = append(out, pluginSpec{Name: name, Enabled: true, Pin: s.SHA256,
				Problem: fmt.Sprintf("configured, but %s%s is not in %s", pluginPrefix, name, pc.PluginDir)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// fileSHA256 is the SHA-256 of a file.
func fileSHA256(path string) ([]byte, error) {
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

// pluginFailure is a producer plugin that could not run or stopped for
// good; producers run reports them with exit code 8.
type pluginFailure struct {
	Name string
	Err  error
}

// producersFailedError is the error of a producers run in which plugins
// failed (exit 8), the others having run.
type producersFailedError struct{ failures []pluginFailure }

func (e *producersFailedError) Error() string {
	parts := make([]string, len(e.failures))
	for i, f := range e.failures {
		parts[i] = fmt.Sprintf("%s (%v)", f.Name, f.Err)
	}
	noun := "plugin"
	if len(parts) > 1 {
		noun = "plugins"
	}
	return fmt.Sprintf("producers: %d %s failed: %s", len(parts), noun, strings.Join(parts, "; "))
}

// permanentError marks a plugin failure that a restart cannot mend: the
// checksum does not match the pin, the plugin speaks another protocol
// version, or the file cannot be executed.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// host runs producer plugins and admits what they offer.
type host struct {
	svc       *admission.Service
	principal string
	pc        *ProducerConfig
	once      bool
	log       *lineLog
	launch    Launcher

	// timing, when set, accumulates the time spent in plugin calls and in
	// the store (the benchmark).
	timing *hostTiming

	// killAfterAdmit is a test hook: SIGKILL the host right after an
	// admission is durable, before the settle (a lost acknowledgement).
	killAfterAdmit bool
}

// run runs every enabled plugin until ctx ends (or, once, until each has
// nothing ready) and returns the failures.
func (h *host) run(ctx context.Context, specs []pluginSpec) []pluginFailure {
	var mu sync.Mutex
	var failures []pluginFailure
	var wg sync.WaitGroup
	for _, spec := range specs {
		if !spec.Enabled {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.supervise(ctx, spec); err != nil {
				h.log.printf(spec.Name, "failed: %v", err)
				mu.Lock()
				failures = append(failures, pluginFailure{Name: spec.Name, Err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(failures, func(i, j int) bool { return failures[i].Name < failures[j].Name })
	return failures
}

// supervise runs one plugin, restarting it with backoff when it crashes or
// hangs, until ctx ends (once: until it has nothing ready). It returns the
// error that stopped it for good.
func (h *host) supervise(ctx context.Context, spec pluginSpec) error {
	if spec.Problem != "" {
		return &permanentError{errors.New(spec.Problem)}
	}
	backoff := 200 * time.Millisecond
	for starts := 1; ; starts++ {
		began := time.Now()
		err := h.session(ctx, spec)
		var perm *permanentError
		switch {
		case err == nil, ctx.Err() != nil:
			return nil
		case errors.As(err, &perm), errors.Is(err, backend.ErrUnavailable) && h.once:
			return err
		case h.once && starts >= onceStarts:
			return fmt.Errorf("%w (gave up after %d starts)", err, starts)
		}
		if time.Since(began) > time.Minute {
			backoff = 200 * time.Millisecond
		}
		h.log.printf(spec.Name, "%v; restarting in %s", err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// hostTiming is where a host's time went.
type hostTiming struct {
	mu         sync.Mutex
	rpc, store time.Duration
	admitted   int
}

func (t *hostTiming) add(rpc, store time.Duration, n int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.rpc += rpc
	t.store += store
	t.admitted += n
	t.mu.Unlock()
}

// pluginEnv is the whole environment a plugin gets: a few harmless
// variables of the host's (never the store URL or its credentials) and its
// own name, state folder and lease.
func (h *host) pluginEnv(spec pluginSpec) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		producer.EnvName+"="+spec.Name,
		producer.EnvStateDir+"="+h.pc.pluginStateDir(spec.Name))
	if h.pc.Lease > 0 {
		env = append(env, producer.EnvLease+"="+h.pc.Lease.String())
	}
	if len(spec.Config) > 0 {
		env = append(env, producer.EnvConfig+"="+string(spec.Config))
	}
	return env
}

// session starts the plugin once and drives it until ctx ends, it fails,
// or (once) it has nothing ready.
func (h *host) session(ctx context.Context, spec pluginSpec) error {
	if err := os.MkdirAll(h.pc.pluginStateDir(spec.Name), 0o700); err != nil {
		return &permanentError{fmt.Errorf("state folder: %w", err)}
	}
	cmd := exec.Command(spec.Path) // run directly, never through a shell
	cmd.Env = h.pluginEnv(spec)
	cmd.Dir = h.pc.pluginStateDir(spec.Name)
	dieWithParent(cmd)
	out := h.log.writer(spec.Name)
	defer out.flush()
	client, err := h.launch(cmd, LaunchOptions{Pin: spec.Pin, StartTimeout: h.pc.StartTimeout, Output: out})
	if err != nil {
		var perm interface{ Permanent() bool }
		if errors.As(err, &perm) && perm.Permanent() {
			return &permanentError{err}
		}
		return err
	}
	defer client.Kill()
	p := client.Producer()
	pause := time.Duration(0)
	for {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(pause):
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		n, err := h.round(ctx, spec.Name, p)
		if err != nil {
			if exited(client) {
				return fmt.Errorf("plugin exited: %w", err)
			}
			return err
		}
		switch {
		case n == 0 && h.once:
			return nil
		case n == 0:
			pause = h.pc.Poll
		default:
			pause = 0
		}
	}
}

// exited reports whether the plugin process has exited, giving it a moment:
// a failed call is often seen before the process's end is.
func exited(c PluginClient) bool {
	for range 20 {
		if c.Exited() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// round polls the plugin once, admits the offers in one batch and settles
// each. It returns how many offers it took.
func (h *host) round(ctx context.Context, name string, p producer.Producer) (int, error) {
	t0 := time.Now()
	offers, err := p.Poll(ctx, pollMax)
	rpc := time.Since(t0)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		return 0, err
	}
	if len(offers) == 0 {
		return 0, nil
	}
	// An admission in flight is finished and settled even when a signal
	// arrives meanwhile: stopping halfway only costs a re-offer later.
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	ins := make([]admission.Input, len(offers))
	for i, o := range offers {
		ins[i] = offerInput(name, h.principal, o)
	}
	t1 := time.Now()
	results, batchErr := h.svc.AdmitBatch(work, ins)
	inStore := time.Since(t1)
	if h.killAfterAdmit && batchErr == nil {
		killSelf()
	}
	var unavailable error
	for i, o := range offers {
		err := results[i].Err
		if err == nil {
			err = batchErr
		}
		action, reason := producer.Complete, ""
		switch {
		case err == nil:
			// Admitted, coalesced or duplicate: the events are in the
			// store, durably. A duplicate is a success: the lost
			// acknowledgement of an earlier round.
		case errors.Is(err, backend.ErrInvalid):
			action, reason = producer.Drop, oneLine(err.Error())
			h.log.printf(name, "dropped %s: %s", describeOffer(o), reason)
		case errors.Is(err, backend.ErrUnavailable):
			action, reason = producer.Defer, oneLine(err.Error())
			unavailable = err
		default:
			action, reason = producer.Release, oneLine(err.Error())
			h.log.printf(name, "released %s: %s", describeOffer(o), reason)
		}
		t2 := time.Now()
		err = p.Settle(work, o.Claim, action, reason)
		rpc += time.Since(t2)
		if err != nil {
			// The claim stays taken until its lease runs out; then the
			// events are offered again and resolve to their admissions.
			h.log.printf(name, "settle %s of %s: %v", action, describeOffer(o), err)
			if !errors.Is(err, producer.ErrUnknownClaim) {
				return len(offers), err
			}
		}
	}
	admitted := 0
	for _, o := range offers {
		admitted += len(o.IdentityList())
	}
	h.timing.add(rpc, inStore, admitted)
	if unavailable != nil {
		return len(offers), fmt.Errorf("store unavailable, offers deferred: %w", unavailable)
	}
	return len(offers), nil
}

// offerInput is the admission input of an offer.
func offerInput(name, principal string, o producer.Offer) admission.Input {
	in := admission.Input{
		Session:    o.Session,
		Target:     o.Target,
		Producer:   name,
		Principal:  principal,
		Identities: o.Identities,
		Text:       o.Text,
		Payload:    o.Payload,
	}
	for _, p := range o.Parts {
		in.Parts = append(in.Parts, admission.Part{Identity: p.Identity, Text: p.Text, Payload: p.Payload})
	}
	return in
}

func describeOffer(o producer.Offer) string {
	return fmt.Sprintf("offer for session %q (identities %s)", o.Session, strings.Join(o.IdentityList(), " "))
}

// lineLog writes plugin output and host diagnostics to stderr, one line
// at a time, each prefixed with "hermesq: producer NAME: " and with control
// characters escaped.
type lineLog struct {
	mu  sync.Mutex
	out io.Writer
}

func (l *lineLog) printf(name, format string, args ...any) {
	l.line(name, fmt.Sprintf(format, args...))
}

func (l *lineLog) line(name, s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "hermesq: producer %s: %s\n", name, escapeControl(s))
}

// writer returns a writer that logs each line written to it.
func (l *lineLog) writer(name string) *prefixWriter {
	return &prefixWriter{log: l, name: name}
}

type prefixWriter struct {
	log  *lineLog
	name string
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.buf.Next(i+1)), "\r\n")
		if line, ok := renderLogLine(line); ok {
			w.log.line(w.name, line)
		}
	}
	if w.buf.Len() > 64<<10 { // a very long line: log it in pieces
		w.log.line(w.name, w.buf.String())
		w.buf.Reset()
	}
	return len(b), nil
}

// renderLogLine turns a JSON log line of hclog (go-plugin's logger in a
// plugin) into "level: message key=value…", and hides its trace and debug
// lines; other lines are kept as they are. Empty lines are dropped.
func renderLogLine(line string) (string, bool) {
	if strings.TrimSpace(line) == "" {
		return "", false
	}
	if !strings.HasPrefix(line, "{") {
		return line, true
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return line, true
	}
	level, _ := m["@level"].(string)
	msg, ok := m["@message"].(string)
	if !ok {
		return line, true
	}
	if level == "trace" || level == "debug" {
		return "", false
	}
	var b strings.Builder
	b.WriteString(level + ": " + msg)
	keys := make([]string, 0, len(m))
	for k := range m {
		if !strings.HasPrefix(k, "@") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, m[k])
	}
	return b.String(), true
}

func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 0 {
		w.log.line(w.name, w.buf.String())
		w.buf.Reset()
	}
}

// escapeControl writes control characters as Go escapes, so a plugin's
// output cannot drive the operator's terminal.
func escapeControl(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
