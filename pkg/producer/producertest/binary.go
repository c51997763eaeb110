package producertest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/plugin"
)

// BinaryOptions steer StartBinary.
type BinaryOptions struct {
	// Config is the plugin's own settings, given as HERMESQ_PRODUCER_CONFIG
	// (hermesq's producers.NAME.config as JSON); nil: unset.
	Config json.RawMessage
	// StateDir is the plugin's state folder (HERMESQ_PRODUCER_STATE); "":
	// a new temporary folder.
	StateDir string
	// Lease is the claim lease (HERMESQ_PRODUCER_LEASE); 0: the default.
	Lease time.Duration
	// StartTimeout bounds the handshake; 0: 30 s.
	StartTimeout time.Duration
}

// StartBinary starts the plugin binary at path as hermesq's host does: run
// directly, with none of the test's environment but PATH, HOME and TMPDIR
// and the plugin's own variables (producer.EnvName from the binary's name
// hermesq-producer-NAME, EnvStateDir, EnvLease, EnvConfig), over go-plugin's
// gRPC transport with mutual TLS. It returns the plugin's Producer, whose
// calls go to the plugin process; the plugin's stderr goes to the test log,
// and the plugin is stopped when the test ends. A plugin that does not
// start (a configuration it refuses, a failed handshake) fails the test
// with why.
func StartBinary(t testing.TB, path string, o BinaryOptions) producer.Producer {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatalf("producertest: %v", err)
	}
	state := o.StateDir
	if state == "" {
		state = t.TempDir()
	}
	cmd := exec.Command(abs)
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env,
		producer.EnvName+"="+strings.TrimPrefix(filepath.Base(abs), "hermesq-producer-"),
		producer.EnvStateDir+"="+state)
	if o.Lease > 0 {
		cmd.Env = append(cmd.Env, producer.EnvLease+"="+o.Lease.String())
	}
	if o.Config != nil {
		cmd.Env = append(cmd.Env, producer.EnvConfig+"="+string(o.Config))
	}
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	out := &testLog{t: t}
	c, err := plugin.Start(cmd, plugin.StartOptions{StartTimeout: timeout, Output: out})
	if err != nil {
		t.Fatalf("producertest: start %s: %v; its output:\n%s", path, err, out.String())
	}
	t.Cleanup(func() {
		c.Kill()
		out.stop()
	})
	return c.Producer()
}

// RunBinary runs Run's checks on the plugin binary at path started with
// configuration config (see StartBinary) and a new state folder: the
// configuration must give the plugin at least one event to offer (a watch
// of a file holding a matching line, say).
func RunBinary(t *testing.T, path string, config json.RawMessage) {
	t.Helper()
	check(t, StartBinary(t, path, BinaryOptions{Config: config}))
}

// testLog writes a plugin's output lines to the test log (and keeps them
// for an error message) until the test ends.
type testLog struct {
	t       testing.TB
	mu      sync.Mutex
	buf     bytes.Buffer
	stopped bool
}

var _ io.Writer = (*testLog)(nil)

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() < 64<<10 {
		l.buf.Write(p)
	}
	if !l.stopped {
		l.t.Logf("plugin: %s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *testLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}
