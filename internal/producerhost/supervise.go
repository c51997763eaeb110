package producerhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
)

// permanentError marks a plugin failure that a restart cannot mend: the
// checksum does not match the pin, the plugin speaks another protocol
// version, cannot be executed, or reported a permanent failure.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// deadlineError is a plugin call that missed its deadline.
type deadlineError struct {
	call, key string
	d         time.Duration
}

func (e *deadlineError) Error() string {
	return fmt.Sprintf("%s did not return within %s (%s); plugin killed", e.call, e.d, e.key)
}

// pollError is an error a plugin returned from Poll.
type pollError struct{ err error }

func (e *pollError) Error() string { return "poll failed: " + oneLine(e.err.Error()) }
func (e *pollError) Unwrap() error { return e.err }

// supervise runs one plugin, restarting it with backoff when it crashes,
// hangs or misses a deadline, until ctx ends (Once: until it has nothing
// ready). It returns the error that stopped it for good; with Once, a
// missed deadline is one even when a later start ran clean.
func (h *Host) supervise(ctx context.Context, spec Spec, st *runState) error {
	if spec.Problem != "" {
		return &permanentError{errors.New(spec.Problem)}
	}
	backoff := restartBase
	for starts := 1; ; starts++ {
		began := time.Now()
		err := h.session(ctx, spec, st)
		var perm *permanentError
		switch {
		case err == nil, ctx.Err() != nil:
			if h.Once && st.missed != nil && ctx.Err() == nil {
				return st.missed
			}
			return nil
		case errors.As(err, &perm):
			return err
		case h.Once && starts >= OnceStarts:
			return fmt.Errorf("%w (gave up after %d starts)", err, starts)
		}
		if time.Since(began) > time.Minute {
			backoff = restartBase
		}
		h.log.printf(spec.Name, "%v; restarting in %s", err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartCap)
	}
}

// pluginEnv is the whole environment a plugin gets: a few harmless
// variables of the host's (never the store URL or its credentials) and its
// own name, state folder, lease and age limit.
func (h *Host) pluginEnv(spec Spec) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		producer.EnvName+"="+spec.Name,
		producer.EnvStateDir+"="+h.Config.PluginStateDir(spec.Name))
	if h.Config.Lease > 0 {
		env = append(env, producer.EnvLease+"="+h.Config.Lease.String())
	}
	if h.Config.MaxAge > 0 {
		env = append(env, producer.EnvMaxAge+"="+h.Config.MaxAge.String())
	}
	if len(spec.Config) > 0 {
		env = append(env, producer.EnvConfig+"="+string(spec.Config))
	}
	return env
}

// session starts the plugin once and drives it until ctx ends, it fails,
// or (Once) it has nothing ready.
func (h *Host) session(ctx context.Context, spec Spec, st *runState) error {
	if err := os.MkdirAll(h.Config.PluginStateDir(spec.Name), 0o700); err != nil {
		return &permanentError{fmt.Errorf("state folder: %w", err)}
	}
	cmd := exec.Command(spec.Path) // run directly, never through a shell
	cmd.Env = h.pluginEnv(spec)
	cmd.Dir = h.Config.PluginStateDir(spec.Name)
	dieWithParent(cmd)
	out := h.log.writer(spec.Name)
	defer out.flush()
	client, err := h.Launch(cmd, LaunchOptions{Pin: spec.Pin, StartTimeout: h.Config.StartTimeout, Output: out})
	if err != nil {
		var pin interface{ PinMismatch() bool }
		if errors.As(err, &pin) && pin.PinMismatch() {
			// Name the binary's own checksum, so a stale pin is told
			// from a swapped binary.
			if sum, serr := FileSHA256(spec.Path); serr == nil {
				err = fmt.Errorf("%w (%s has sha256 %x, pinned %x)", err, spec.Path, sum, spec.Pin)
			}
		}
		var perm interface{ Permanent() bool }
		if errors.As(err, &perm) && perm.Permanent() {
			return &permanentError{err}
		}
		if strings.Contains(err.Error(), "before the handshake") {
			if last := out.last(); last != "" {
				return fmt.Errorf("%w: %s", err, last)
			}
		}
		return err
	}
	defer client.Kill()
	p := client.Producer()
	pl := &pipeline{}
	defer h.finish(ctx, spec.Name, p, st, pl)
	pause := time.Duration(0)
	pollFails := 0
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
		n, err := h.round(ctx, spec.Name, p, st, pl)
		var miss *deadlineError
		var pe *pollError
		switch {
		case err == nil:
		case errors.As(err, &miss):
			// Hung: kill it at once (a graceful stop would wait for the
			// call it hangs in); its claims come back after the lease.
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
			st.mu.Lock()
			st.missed = err
			st.mu.Unlock()
			return err
		case errors.Is(err, producer.ErrPermanent):
			return &permanentError{fmt.Errorf("%s (a permanent failure: not restarted)", oneLine(err.Error()))}
		case errors.As(err, &pe):
			if exited(client) {
				return fmt.Errorf("plugin exited: %w", err)
			}
			pollFails++
			if h.Once && pollFails >= OnceStarts {
				return &permanentError{fmt.Errorf("%w (%d polls in a row)", err, pollFails)}
			}
			pause = min(pollErrBase<<(pollFails-1), pollErrCap)
			h.log.printf(spec.Name, "%v; polling again in %s", err, pause)
			continue
		default:
			if exited(client) {
				return fmt.Errorf("plugin exited: %w", err)
			}
			return err
		}
		pollFails = 0
		switch {
		case n == 0 && h.Once:
			return nil
		case n == 0:
			pause = h.Config.Poll
		default:
			pause = 0
		}
	}
}

// exited reports whether the plugin process has exited, giving it a moment:
// a failed call is often seen before the process's end is.
func exited(c Client) bool {
	for range 20 {
		if c.Exited() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
