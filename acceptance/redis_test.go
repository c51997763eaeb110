package acceptance

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
)

// faultN is the number of admissions of the Redis fault test:
// HERMESQ_FAULT_N, default 400 (CI's soak run sets 5000).
func faultN(t *testing.T) int {
	t.Helper()
	v := os.Getenv("HERMESQ_FAULT_N")
	if v == "" {
		return 400
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 8 {
		t.Fatalf("HERMESQ_FAULT_N=%q: want a number ≥ 8", v)
	}
	return n
}

// TestRedisFaultAdmitDuringKill: Redis (AOF, appendfsync always) is killed
// with SIGKILL and restarted while 8 concurrent `hermesq admit` processes
// commit N admissions, each with its own request id. Every admit either
// succeeded (exit 0, and its admission exists afterwards) or failed with 75;
// re-running the failed ones creates no duplicate: exactly N admissions.
func TestRedisFaultAdmitDuringKill(t *testing.T) {
	n := faultN(t)
	srv := redistest.Start(t, redistest.WithAOF())
	c := newCLI(t, srv.URL())
	c.ok("session", "open", "s1")
	timeout := []string{"--timeout", "2s"}

	type outcome struct {
		code int
		id   string // admission id when it succeeded
		out  string
	}
	results := make([]outcome, n)
	admit := func(i int) outcome {
		args := append(append([]string{}, timeout...), "-o", "json", "admit", "s1",
			"--request-id", fmt.Sprintf("req-%05d", i), "--text", fmt.Sprintf("input %d", i))
		r := c.run(nil, args...)
		o := outcome{code: r.code, out: r.String()}
		if r.code == 0 {
			var ar admitResult
			if err := json.Unmarshal([]byte(r.stdout), &ar); err != nil || ar.Admission.ID == "" {
				t.Errorf("admit %d: exit 0 without an admit result on stdout: %v\n%v", i, err, r)
			}
			o.id = ar.Admission.ID
		}
		return o
	}

	var done, failed atomic.Int64
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = admit(i)
				if results[i].code == 75 {
					failed.Add(1)
				}
				done.Add(1)
			}
		}()
	}
	// The fault: kill Redis once a quarter of the load is through, keep it
	// down until admits have seen it fail, then restart it (AOF replay);
	// and once more at three quarters.
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		for _, at := range []int64{int64(n) / 4, int64(n) * 3 / 4} {
			for done.Load() < at {
				time.Sleep(5 * time.Millisecond)
			}
			before := failed.Load()
			srv.Kill()
			deadline := time.Now().Add(time.Minute)
			for failed.Load() == before && done.Load() < int64(n) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			srv.Restart()
		}
	}()
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	<-faults

	var retry []int
	for i, o := range results {
		switch o.code {
		case 0:
		case 75:
			retry = append(retry, i)
		default:
			t.Errorf("admit %d: exit %d, want 0 or 75:\n%s", i, o.code, o.out)
		}
	}
	if len(retry) == 0 {
		t.Errorf("no admit failed with 75: the kills did not happen under load")
	}
	t.Logf("%d admits, %d failed with 75 while Redis was down and were re-run", n, len(retry))

	// Re-run the failed ones: each resolves to the admission it may have
	// committed before the server died, or commits it now.
	for _, i := range retry {
		results[i] = admit(i)
		if results[i].code != 0 {
			t.Fatalf("re-run of admit %d: %s", i, results[i].out)
		}
	}

	as := c.all("s1")
	if len(as) != n {
		t.Errorf("%d admissions after the faults, want exactly %d", len(as), n)
	}
	byID := map[string]backend.Admission{}
	reqs := map[string]int{}
	for _, a := range as {
		byID[a.ID] = a
		reqs[a.RequestID]++
	}
	for rid, k := range reqs {
		if k != 1 {
			t.Errorf("request id %s has %d admissions, want 1", rid, k)
		}
	}
	for i, o := range results {
		a, ok := byID[o.id]
		if !ok {
			t.Errorf("admit %d succeeded with admission %s, which does not exist afterwards", i, o.id)
			continue
		}
		if want := fmt.Sprintf("req-%05d", i); a.RequestID != want || a.Text() != fmt.Sprintf("input %d", i) {
			t.Errorf("admit %d: admission %s has request id %q, text %q", i, o.id, a.RequestID, a.Text())
		}
	}
	for k := 1; k < len(as); k++ {
		if as[k].Seq <= as[k-1].Seq {
			t.Fatalf("seqs not strictly increasing: %d then %d", as[k-1].Seq, as[k].Seq)
		}
	}

	// With Redis down a command gives up with 75 within its --timeout.
	srv.Kill()
	for _, args := range [][]string{
		{"--timeout", "1s", "admit", "s1", "--text", "while down"},
		{"--timeout", "1s", "queue", "s1"},
	} {
		if r := c.run(nil, args...); r.code != 75 {
			t.Errorf("with Redis down, want exit 75: %v", r)
		}
	}
	srv.Restart()
	if got := len(c.all("s1")); got != n {
		t.Errorf("%d admissions after the last restart, want %d", got, n)
	}
}

// TestRedisImportFromBolt moves a store from bbolt to Redis with export and
// import: the Redis export has the same admissions, identities, transcripts,
// messages and lineage; importing twice changes nothing; and the imported
// store goes on working (identities and request ids still deduplicate).
func TestRedisImportFromBolt(t *testing.T) {
	srv := redistest.Start(t)
	bolt := newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db"))

	// A store with some history: turns, notes, a coalesced automation
	// offer, a failed turn, a cancelled input, a compression, a close, a
	// grant and a replay.
	bolt.ok("session", "open", "s1")
	bolt.ok("admit", "s1", "--text", "hello", "--request-id", "r-1")
	bolt.admitAuto("s1", "process", "[finished] build (exit 0)", "", `["completion","p1","1700000000.0"]`)
	co := bolt.admitAuto("s1", "delegation", "two results", "", `["async_delegation","d1",""]`, `["async_delegation","d2",""]`)
	if co.Result != backend.ResultCoalesced {
		t.Fatalf("coalesced offer: %q", co.Result)
	}
	bolt.ok("drain", "s1", "--", "handler")
	bolt.ok("session", "compress", "s1", "--child", "s1.2")
	bolt.ok("admit", "s1", "--text", "after compression")
	cancelled := bolt.admitHuman("s1", "never mind")
	bolt.ok("cancel", cancelled.Admission.ID)
	bolt.ok("drain", "s1", "--", "handler")
	bolt.ok("session", "close", "s1", "--reason", "cli_close")
	bolt.admitAuto("s1", "process", "[finished] late (exit 1)", "s1", `["completion","p2","1700000001.0"]`)
	bolt.ok("drain", "s1")
	bolt.ok("session", "open", "s2")
	bolt.ok("session", "grant", "s2", "bob")
	bolt.ok("admit", "s2", "--text", "queued for later", "--request-id", "r-2")
	if r := bolt.run([]string{"HERMESQ_EXAMPLE_FAIL=1"}, "drain", "s2", "--", "handler"); r.code != 6 {
		t.Fatalf("a failed turn: want exit 6: %v", r)
	}
	bolt.ok("admit", "s2", "--text", "queued for later too")
	exp1 := bolt.export()

	red := newCLI(t, srv.FreshURL())
	if r := red.runStdin(exp1, "import"); r.code != 0 {
		t.Fatalf("import into Redis: %v", r)
	}
	exp2 := red.export()
	diffExports(t, "bbolt export vs Redis export after import", exp1, exp2)
	for _, tr := range []string{"s1", "s1.2"} {
		if d := cmp.Diff(bolt.lineage(tr), red.lineage(tr)); d != "" {
			t.Errorf("lineage of %s differs (-bbolt +redis):\n%s", tr, d)
		}
		if d := cmp.Diff(bolt.messages(tr), red.messages(tr)); d != "" {
			t.Errorf("messages of %s differ (-bbolt +redis):\n%s", tr, d)
		}
	}
	for _, id := range []string{`["completion","p1","1700000000.0"]`, `["async_delegation","d2",""]`} {
		var ab, ar backend.Admission
		bolt.jsonOut(&ab, "find", id)
		red.jsonOut(&ar, "find", id)
		if d := cmp.Diff(ab, ar); d != "" {
			t.Errorf("find %s differs (-bbolt +redis):\n%s", id, d)
		}
	}

	if r := red.runStdin(exp1, "import"); r.code != 0 {
		t.Fatalf("second import: %v", r)
	}
	if exp3 := red.export(); exp3 != exp2 {
		diffExports(t, "export after a second import", exp2, exp3)
		t.Errorf("a second import changed the store")
	}

	// The imported identities and request ids still resolve.
	again := red.admitAuto("s1", "delegation", "two results", "", `["async_delegation","d1",""]`)
	if again.Result != backend.ResultDuplicate || again.Admission.ID != co.Admission.ID {
		t.Errorf("re-offer of an imported identity: %q %s, want duplicate of %s", again.Result, again.Admission.ID, co.Admission.ID)
	}
	var dup admitResult
	red.jsonOut(&dup, "admit", "s2", "--text", "queued for later", "--request-id", "r-2")
	if dup.Result != backend.ResultDuplicate {
		t.Errorf("re-admit of an imported request id: %q, want duplicate", dup.Result)
	}
	if r := red.run(nil, "admit", "s2", "--text", "other", "--request-id", "r-2"); r.code != 4 {
		t.Errorf("imported request id with another payload: %v, want exit 4", r)
	}
}

// diffExports compares two NDJSON exports record by record, keyed by what
// each record is (session, transcript, message, admission).
func diffExports(t *testing.T, what, a, b string) {
	t.Helper()
	ma, mb := exportRecords(t, a), exportRecords(t, b)
	if len(ma) == 0 {
		t.Fatalf("%s: empty export", what)
	}
	if d := cmp.Diff(ma, mb); d != "" {
		t.Errorf("%s (-first +second):\n%s", what, d)
	}
}

func exportRecords(t *testing.T, ndjson string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(ndjson), "\n") {
		if line == "" {
			continue
		}
		var rec backend.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		var key string
		var v any
		switch {
		case rec.Session != nil:
			rec.Session.Grants = backend.NormalGrants(rec.Session.Grants)
			key, v = "session "+rec.Session.ID, rec.Session
		case rec.Transcript != nil:
			key, v = "transcript "+rec.Transcript.ID, rec.Transcript
		case rec.Message != nil:
			key, v = fmt.Sprintf("message %s/%d", rec.Message.Transcript, rec.Message.Seq), rec.Message
		case rec.Admission != nil:
			key, v = "admission "+rec.Admission.ID, rec.Admission
		default:
			t.Fatalf("export line %q: no record", line)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[key]; dup {
			t.Errorf("export has %s twice", key)
		}
		out[key] = string(b)
	}
	return out
}

// TestRedisCredentials: wrong credentials exit 7 with a clear message, an
// unreachable Redis exits 75, and the password appears in no output of any
// command.
func TestRedisCredentials(t *testing.T) {
	const user, pass = "hermesq-app", "Tr0ub4dor-and-3-horses"
	srv := redistest.Start(t, redistest.WithACL(user, pass))
	good := srv.URL()
	wrong := strings.Replace(good, url.UserPassword(user, pass).String(), url.UserPassword(user, "not-the-password").String(), 1)
	if wrong == good {
		t.Fatal("could not build the wrong-password URL")
	}
	noUser := strings.Replace(good, url.UserPassword(user, pass).String()+"@", "", 1)
	var all []result
	check := func(r result) result {
		all = append(all, r)
		return r
	}

	c := newCLI(t, good)
	check(c.ok("session", "open", "s1"))
	check(c.ok("admit", "s1", "--text", "with the right password"))
	check(c.ok("-o", "json", "sessions"))

	for name, u := range map[string]string{"wrong password": wrong, "no credentials": noUser} {
		for _, out := range []string{"text", "json"} {
			r := check(c.run(nil, "--store", u, "-o", out, "admit", "s1", "--text", "x"))
			if r.code != 7 {
				t.Errorf("%s (-o %s): want exit 7: %v", name, out, r)
			}
			if !strings.Contains(strings.ToLower(r.stderr), "auth") {
				t.Errorf("%s (-o %s): stderr does not say authentication failed: %q", name, out, r.stderr)
			}
			if out == "json" && !strings.Contains(r.stderr, `"error":"forbidden"`) {
				t.Errorf("%s -o json: stderr %q, want the forbidden error object", name, r.stderr)
			}
		}
	}
	// The wrong password from the environment, and from a config file.
	cf := newCLI(t, wrong)
	if r := check(cf.run(nil, "sessions")); r.code != 7 {
		t.Errorf("wrong password from HERMESQ_STORE: want exit 7: %v", r)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("store: "+strconv.Quote(wrong)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := check(cf.run([]string{"HERMESQ_STORE="}, "--config", cfg, "sessions")); r.code != 7 {
		t.Errorf("wrong password from a config file: want exit 7: %v", r)
	}
	// The right password from a config file works.
	if err := os.WriteFile(cfg, []byte("store: "+strconv.Quote(good)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := check(cf.run([]string{"HERMESQ_STORE="}, "--config", cfg, "-o", "json", "session", "show", "s1")); r.code != 0 {
		t.Errorf("right password from a config file: %v", r)
	}

	// Unreachable: the same server killed, then a closed port.
	srv.Kill()
	if r := check(c.run(nil, "--timeout", "1s", "admit", "s1", "--text", "down")); r.code != 75 {
		t.Errorf("Redis down: want exit 75: %v", r)
	}
	if r := check(c.run(nil, "--timeout", "1s", "-o", "json", "session", "show", "s1")); r.code != 75 || !strings.Contains(r.stderr, `"error":"unavailable"`) {
		t.Errorf("Redis down, -o json: want exit 75 and the unavailable error object: %v", r)
	}

	for _, r := range all {
		if strings.Contains(r.stdout, pass) || strings.Contains(r.stderr, pass) {
			t.Errorf("the password appears in the output of hermesq %s:\nstdout: %s\nstderr: %s",
				strings.Join(redactArgs(r.args, pass), " "), r.stdout, r.stderr)
		}
	}
}

func redactArgs(args []string, pass string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, pass, "xxxxx")
	}
	return out
}
