package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
	"github.com/hermesq/hermesq/pkg/producer/producertest"
)

// resultSessions is how many sessions the delegation results of figure 10
// are for, interleaved, so that each poll groups a few results a session.
const resultSessions = 100

// figure10: producers. Delegation results recorded in the delegation
// plugin's outbox (in process, through pkg/producer's outbox), delivered
// into the store by one `hermesq producers run --once`, against one
// `admit --batch` of the same admissions (read back from the store: same
// sessions, identities, parts) into a fresh store, on each store.
func figure10(e *env, sz sizes) ([]Result, error) {
	plugins, err := e.buildProducers()
	if err != nil {
		return nil, err
	}
	var rs []Result
	for _, st := range []string{"bbolt", "Redis"} {
		u, err := e.storeURL(st)
		if err != nil {
			return nil, err
		}
		wall, timing, lines, err := e.produce(u, plugins, sz.Results)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st, err)
		}
		if u, err = e.storeURL(st); err != nil {
			return nil, err
		}
		batch, err := e.batchSame(u, lines)
		if err != nil {
			return nil, fmt.Errorf("%s: admit --batch: %w", st, err)
		}
		rs = append(rs, withNote(rate("10", fmt.Sprintf("%d delegation results through the plugin, %s", sz.Results, st),
			perSec(sz.Results, wall), fmt.Sprintf("admit --batch of the same %d admissions", bytes.Count(lines, []byte("\n"))),
			perSec(sz.Results, batch), ">= 0.5"), fmt.Sprintf("producers run --once, %d sessions", resultSessions)))
		rs = append(rs, withNote(mk("10", fmt.Sprintf("share of producers run's time, %s: %s", st, timing), 0, "", "", 0, ""),
			"producers run --once --timing"))
	}
	return rs, nil
}

// buildProducers builds hermesq-producers beside the hermesq binary (where
// `hermesq producers run` looks for it) and installs the delegation plugin
// as docs/producers.md says: in a plugin folder of its own, folder and
// binary 0700. It returns the folder.
func (e *env) buildProducers() (string, error) {
	dir := filepath.Join(e.dir, "plugins")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for out, pkg := range map[string]string{
		filepath.Join(e.dir, "hermesq-producers"):         "./cmd/hermesq-producers",
		filepath.Join(dir, "hermesq-producer-delegation"): "./plugins/producers/delegation",
	} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Dir, build.Stderr = e.repo, os.Stderr
		if err := build.Run(); err != nil {
			return "", fmt.Errorf("build %s: %w", pkg, err)
		}
		if err := os.Chmod(out, 0o700); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// produce opens resultSessions sessions in store u, records n delegation
// results in a fresh outbox of the delegation plugin, and times one
// `hermesq producers run --once --timing` with the plugin pinned by its
// SHA-256 in the configuration. It checks that every result was delivered
// and returns the time, the shares of its time that producers run reports
// (rpc, outbox, store, other) and the admissions it made, as admit
// --batch lines.
func (e *env) produce(u, plugins string, n int) (time.Duration, string, []byte, error) {
	ctx := context.Background()
	sessions, err := openOwnSessions(ctx, u)
	if err != nil {
		return 0, "", nil, err
	}
	state := e.fresh("producers")
	ob, err := producer.OpenOutbox(filepath.Join(state, "delegation"), producer.OutboxOptions{})
	if err != nil {
		return 0, "", nil, err
	}
	evs := producertest.DelegationResults(n, len(sessions)) // for sessions s000, s001, …
	if added, err := ob.AddAll(ctx, evs); err != nil || added != n {
		return 0, "", nil, fmt.Errorf("outbox: added %d of %d: %v", added, n, err)
	}
	sum, err := fileSHA256(filepath.Join(plugins, "hermesq-producer-delegation"))
	if err != nil {
		return 0, "", nil, err
	}
	config := e.fresh("producers") + ".yaml"
	yaml := fmt.Sprintf("plugin_dir: %s\nproducer_state_dir: %s\nproducers:\n  delegation:\n    sha256: %q\n",
		plugins, state, sum)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		return 0, "", nil, err
	}
	wall, stderr, err := e.hqStderr(u, []string{"HERMESQ_CONFIG=" + config}, "producers", "run", "--once", "--timing")
	if err != nil {
		return 0, "", nil, err
	}
	m := timingShares.FindStringSubmatch(stderr)
	if m == nil {
		return 0, "", nil, fmt.Errorf("producers run --timing printed no timing line: %.300s", stderr)
	}
	c, err := ob.Count(ctx)
	if err != nil {
		return 0, "", nil, err
	}
	if c.Delivered != n || c.Pending != 0 {
		return 0, "", nil, fmt.Errorf("producers run delivered %d of %d results, %d pending", c.Delivered, n, c.Pending)
	}
	lines, err := admissionLines(ctx, u, sessions)
	return wall, m[1], lines, err
}

// timingShares finds the shares in the delegation plugin's line of
// producers run --timing.
var timingShares = regexp.MustCompile(`(?m)^hermesq: producer delegation: timing: .*?: (rpc .*)$`)

// hqStderr times one hermesq command in store u, as hqEnv does, and
// returns its stderr.
func (e *env) hqStderr(u string, extra []string, args ...string) (time.Duration, string, error) {
	cmd := exec.Command(e.hermesq, args...)
	cmd.Env = append(os.Environ(), "HERMESQ_STORE="+u, "XDG_CONFIG_HOME="+filepath.Join(e.dir, "config"))
	cmd.Env = append(cmd.Env, extra...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return 0, "", fmt.Errorf("hermesq %s: %v: %s", strings.Join(args, " "), err, firstLines(errb.String()))
	}
	return wall, errb.String(), nil
}

// openOwnSessions opens resultSessions sessions in store u, owned by the
// OS user (the principal hermesq runs as on both stores here), and returns
// their ids.
func openOwnSessions(ctx context.Context, u string) ([]string, error) {
	me, err := user.Current()
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, u)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ids := make([]string, resultSessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%03d", i)
		if _, _, err := st.OpenSession(ctx, backend.OpenSessionRequest{ID: ids[i], Owner: me.Username}); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// admissionLines reads the admissions of the sessions of store u and
// writes each as the admit --batch line that makes the same admission:
// session, producer, target, and its parts (identity and payload each).
func admissionLines(ctx context.Context, u string, sessions []string) ([]byte, error) {
	st, err := openStore(ctx, u)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	type part struct {
		Identity string          `json:"identity"`
		Payload  json.RawMessage `json:"payload"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, s := range sessions {
		as, err := st.ListAdmissions(ctx, s, backend.AdmissionFilter{})
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			var p struct {
				Parts []part `json:"parts"`
			}
			if err := json.Unmarshal(a.Payload, &p); err != nil {
				return nil, fmt.Errorf("admission %s: payload: %w", a.ID, err)
			}
			if len(p.Parts) == 0 { // one part is the payload as it is
				p.Parts = []part{{Identity: a.Identities[0], Payload: a.Payload}}
			}
			line := struct {
				Session  string `json:"session"`
				Producer string `json:"producer"`
				Target   string `json:"target"`
				Parts    []part `json:"parts"`
			}{a.Session, a.Producer, a.PinnedTarget, p.Parts}
			if err := enc.Encode(line); err != nil {
				return nil, err
			}
		}
	}
	return b.Bytes(), nil
}

// batchSame opens the sessions in store u and times one `admit --batch`
// of lines.
func (e *env) batchSame(u string, lines []byte) (time.Duration, error) {
	if _, err := openOwnSessions(context.Background(), u); err != nil {
		return 0, err
	}
	r, err := e.hq(u, lines, "admit", "--batch", "-", "-o", "jsonl")
	if err != nil {
		return 0, err
	}
	// A new admission of several parts is "coalesced", of one "admitted".
	got := bytes.Count(r.out, []byte(`"result":"admitted"`)) + bytes.Count(r.out, []byte(`"result":"coalesced"`))
	if want := bytes.Count(lines, []byte("\n")); got != want {
		return 0, fmt.Errorf("%d of %d lines admitted: %.300s", got, want, firstLines(string(r.out)))
	}
	return r.wall, nil
}

// fileSHA256 is the SHA-256 of a file in hex, as a pin is written.
func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
