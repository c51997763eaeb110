package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/admission/admissiontest"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
	redisstore "github.com/hermesq/hermesq/plugins/storage/redis"
)

func TestAdmissionScenarios(t *testing.T) {
	srv := redistest.Start(t)
	admissiontest.RunScenarios(t, func(t *testing.T) backend.Store { return mustOpen(t, srv.FreshURL()) })
}

// The scenarios on a 3-master Cluster: every script of a session on its
// slot, the global lookups on others.
func TestAdmissionScenariosCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	admissiontest.RunScenarios(t, func(t *testing.T) backend.Store { return mustOpen(t, c.FreshURL()) })
}

func TestParseURL(t *testing.T) {
	good := []struct {
		url     string
		hosts   []string
		db      int
		prefix  string
		cluster bool
		sent    string
		tls     bool
	}{
		{"redis://127.0.0.1:7000/0", []string{"127.0.0.1:7000"}, 0, "hermesq", false, "", false},
		{"redis://u:p@host/3?prefix=app", []string{"host:6379"}, 3, "app", false, "", false},
		{"redis://h1:1,h2:2,h3:3/0", []string{"h1:1", "h2:2", "h3:3"}, 0, "hermesq", true, "", false},
		{"redis://h1:1/?cluster=1", []string{"h1:1"}, 0, "hermesq", true, "", false},
		{"redis://s1:26379,s2:26379/2?sentinel=mymaster", []string{"s1:26379", "s2:26379"}, 2, "hermesq", false, "mymaster", false},
		{"rediss://h:6380/0?insecure_skip_verify=true&server_name=redis.example", []string{"h:6380"}, 0, "hermesq", false, "", true},
		// IPv6: with a port, and without (the default port).
		{"redis://[::1]:7000/0", []string{"[::1]:7000"}, 0, "hermesq", false, "", false},
		{"redis://[::1]/0", []string{"[::1]:6379"}, 0, "hermesq", false, "", false},
		{"redis://[fe80::1%25eth0]/1", []string{"[fe80::1%eth0]:6379"}, 1, "hermesq", false, "", false},
	}
	for _, g := range good {
		u, _ := url.Parse(g.url)
		c, err := redisstore.ParseURL(u)
		if err != nil {
			t.Errorf("ParseURL(%s): %v", g.url, err)
			continue
		}
		if strings.Join(c.Hosts, ",") != strings.Join(g.hosts, ",") || c.DB != g.db || c.Prefix != g.prefix ||
			c.Cluster != g.cluster || c.Sentinel != g.sent || (c.TLS != nil) != g.tls {
			t.Errorf("ParseURL(%s) = %+v", g.url, c)
		}
	}
	bad := []string{
		"redis://127.0.0.1:6379/0?bogus=1",
		"redis://127.0.0.1:6379/0?prefix=a&timeout=3",
		"redis://127.0.0.1:6379/x",
		"redis://127.0.0.1:6379/0?ca=/x.pem",
		"redis://h1:1,h2:2/1",
		"redis://h1:1/0?cluster=maybe",
		"redis://h1:1/0?prefix=a{b}",
		"redis://h1:1/0?cluster=1&sentinel=m",
		"rediss://h1:1/0?cert=/only-cert.pem",
		"rediss://h1:1/0?ca=/does/not/exist.pem",
		"redis://h1:99999/0",
		"redis:///0",
		// Issue 24, item 13: nothing of a URL is silently ignored.
		"redis://h1:1/0?prefix=a&prefix=b",
		"redis://h1:1/0?prefix=a#frag",
		"redis://h1:1/0?x=%zz",
		"redis://h1:1,h1:1/0",
		"redis://h1,h1:6379/0",
	}
	for _, b := range bad {
		u, _ := url.Parse(b)
		if _, err := redisstore.ParseURL(u); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("ParseURL(%s): error %v, want ErrInvalid", b, err)
		}
	}
	// However a Config is printed, its password is not.
	pu, _ := url.Parse("redis://app:hunter2-secret@127.0.0.1:7000/0")
	pc, err := redisstore.ParseURL(pu)
	if err != nil || pc.Password != "hunter2-secret" {
		t.Fatalf("ParseURL with a password: %+v, %v", pc.Redacted, err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		for _, v := range []any{pc, *pc} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, "hunter2") || !strings.Contains(out, "127.0.0.1:7000") {
				t.Errorf("Sprintf(%q, %T) shows the password, or not the host (%d bytes)", verb, v, len(out))
			}
		}
	}
	// An unknown parameter is refused by the opener too, before any dial,
	// and the message names it without the password.
	_, err = open(t, "redis://u:hunter2-secret@127.0.0.1:1/0?frobnicate=1", backend.Options{})
	if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "frobnicate") || strings.Contains(err.Error(), "hunter2-secret") {
		t.Fatalf("unknown parameter: %v", err)
	}
	// A lone user part is the password (redis-cli reads it so): it is
	// redacted from every message too, a refused URL's and a failed dial's.
	lone, _ := url.Parse("redis://hunter2-lone@127.0.0.1:1/0?x=1")
	if _, err := redisstore.ParseURL(lone); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ParseURL of a lone password with a bad parameter: %v", err)
	}
	lone, _ = url.Parse("redis://hunter2-lone@127.0.0.1:1/0")
	if pc, err := redisstore.ParseURL(lone); err != nil || pc.Password != "hunter2-lone" || strings.Contains(pc.String(), "hunter2") {
		t.Errorf("ParseURL of a lone password: %v, %v", pc, err)
	}
	if _, err := open(t, "redis://hunter2-lone@127.0.0.1:1/0", backend.Options{Timeout: time.Second}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("open on a closed port with a lone password: %v", err)
	}
}

// backend.Redact hides every credential of a store URL: a password, and a
// lone user part (a Redis URL's password).
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://hunter2@127.0.0.1:7000/0":        "redis://xxxxx@127.0.0.1:7000/0",
		"redis://:hunter2@127.0.0.1:7000/0":       "redis://:xxxxx@127.0.0.1:7000/0",
		"redis://app:hunter2@127.0.0.1:7000/0":    "redis://app:xxxxx@127.0.0.1:7000/0",
		"rediss://h:6380/0?ca=/etc/ca.pem":        "rediss://h:6380/0?ca=/etc/ca.pem",
		"bbolt:///var/lib/hermesq/q.db":           "bbolt:///var/lib/hermesq/q.db",
		"redis://hunter2@h1:1,h2:2/0?prefix=app":  "redis://xxxxx@h1:1,h2:2/0?prefix=app",
		"redis://app:hunter2@[::1]:7000/0":        "redis://app:xxxxx@[::1]:7000/0",
		"redis://hunter2@host:99999999999999/0%z": "(unparsable url)",
	} {
		if got := backend.Redact(in); got != want {
			t.Errorf("Redact(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestACL(t *testing.T) {
	const user, pass = "hermesq-app", "Sup3r-s3cret-pw"
	srv := redistest.Start(t, redistest.WithACL(user, pass))
	s := mustOpen(t, srv.FreshURL())
	if _, _, err := s.OpenSession(context.Background(), backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatalf("with the right password: %v", err)
	}
	good, _ := url.Parse(srv.URL())
	cases := map[string]*url.Userinfo{
		"wrong password": url.UserPassword(user, "not-"+pass),
		"unknown user":   url.UserPassword("nobody", pass),
		"no credentials": nil,
	}
	for name, ui := range cases {
		u := *good
		u.User = ui
		st, err := open(t, u.String(), backend.Options{Timeout: 5 * time.Second})
		if err == nil {
			_, _, err = st.OpenSession(context.Background(), backend.OpenSessionRequest{ID: "s2", Owner: "alice"})
			_ = st.Close()
		}
		if !errors.Is(err, backend.ErrForbidden) {
			t.Errorf("%s: error %v, want ErrForbidden", name, err)
			continue
		}
		if strings.Contains(err.Error(), pass) {
			t.Errorf("%s: the password appears in the error: %v", name, err)
		}
		if !strings.Contains(err.Error(), "authentication refused") {
			t.Errorf("%s: error %q does not say what is wrong", name, err)
		}
	}
	if str := fmt.Sprint(s); strings.Contains(str, pass) {
		t.Errorf("String() shows the password: %s", str)
	}
	// The right password for a user the ACL does not let run the store's
	// commands: forbidden, saying so, not blaming the password.
	const roPass = "r3ad-only-pw"
	if _, err := srv.Do("ACL", "SETUSER", "reader", "on", ">"+roPass, "~*", "&*", "+@read", "-@scripting"); err != nil {
		t.Fatal(err)
	}
	ro := *good
	ro.User = url.UserPassword("reader", roPass)
	st, err := open(t, ro.String(), backend.Options{Timeout: 5 * time.Second})
	if err == nil {
		_, _, err = st.OpenSession(context.Background(), backend.OpenSessionRequest{ID: "s3", Owner: "alice"})
		_ = st.Close()
	}
	if !errors.Is(err, backend.ErrForbidden) || !strings.Contains(err.Error(), "ACL refuses") ||
		strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), roPass) {
		t.Errorf("a user without permissions: %v, want ErrForbidden saying the ACL refuses it", err)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close() // a closed port: connection refused
	// Standalone, Cluster and Sentinel alike: unreachable is
	// ErrUnavailable (exit 75), within the timeout, without the password.
	for _, rawURL := range []string{
		"redis://u:pw-not-shown@127.0.0.1:" + port + "/0",
		"redis://u:pw-not-shown@127.0.0.1:" + port + "/0?cluster=1",
		"redis://u:pw-not-shown@127.0.0.1:" + port + "/0?sentinel=mymaster",
	} {
		done := make(chan error, 1)
		go func() {
			_, err := open(t, rawURL, backend.Options{Timeout: time.Second})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, backend.ErrUnavailable) {
				t.Errorf("%s: closed port: error %v, want ErrUnavailable", backend.Redact(rawURL), err)
			}
			if err != nil && strings.Contains(err.Error(), "pw-not-shown") {
				t.Errorf("password in error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: open of a closed port hangs (no bound)", backend.Redact(rawURL))
		}
	}
}

func TestServerGoesAwayAndComesBack(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAOF())
	rawURL := srv.FreshURL()
	u, _ := url.Parse(rawURL)
	s, err := redisstore.Open(context.Background(), u, backend.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	admit := func() error {
		res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "s1", Kind: backend.KindHuman, Principal: "alice",
			RequestID: "r1", Payload: backendtest.Payload("hello")}})
		if err == nil {
			err = res[0].Err
		}
		return err
	}
	if err := admit(); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("admit with the server down: %v, want ErrUnavailable", err)
	}
	if _, err := s.GetSession(ctx, "s1", time.Time{}); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("get session with the server down: %v, want ErrUnavailable", err)
	}
	srv.Restart()
	if err := admit(); err != nil {
		t.Fatalf("admit after restart: %v", err)
	}
	sess, err := s.GetSession(ctx, "s1", time.Time{})
	if err != nil || sess.Queued != 1 {
		t.Fatalf("after restart: %+v, %v; want the session (AOF) with one queued admission", sess, err)
	}
}

func TestTLS(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS())
	s := mustOpen(t, srv.FreshURL())
	ctx := context.Background()
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	if _, err := s.GetSession(ctx, "s1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	// Without the CA, or under another name, the server's certificate is
	// not trusted: a setting to fix (ErrInternal, exit 1, saying which
	// parameters fix it), never "unavailable, retry later" (exit 75).
	u, _ := url.Parse(srv.FreshURL())
	q := u.Query()
	q.Del("ca")
	u.RawQuery = q.Encode()
	wrongName, _ := url.Parse(srv.FreshURL())
	wq := wrongName.Query()
	wq.Set("server_name", "not-this-server.example")
	wrongName.RawQuery = wq.Encode()
	for what, bad := range map[string]string{"without the CA": u.String(), "under another name": wrongName.String()} {
		_, err := open(t, bad, backend.Options{Timeout: 2 * time.Second})
		if err == nil {
			t.Fatalf("TLS %s succeeded", what)
		}
		if !errors.Is(err, backend.ErrInternal) || errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("TLS %s: %v (code %s), want ErrInternal", what, err, backend.CodeOf(err))
		}
		for _, want := range []string{"certificate is not trusted", "?ca=FILE", "?server_name=NAME"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("TLS %s: %q does not say %q", what, err, want)
			}
		}
	}
	// Plain text to the TLS port fails too.
	u.Scheme = "redis"
	if _, err := open(t, u.String(), backend.Options{Timeout: 2 * time.Second}); err == nil {
		t.Fatal("plain text to a TLS port succeeded")
	}
}

// TestKeysShareSlot checks that every key the store writes for a session
// hashes to the session's slot (CLUSTER KEYSLOT on a real Cluster), and that
// a session's work runs there.
func TestKeysShareSlot(t *testing.T) {
	c := redistest.StartCluster(t)
	prefix := redistest.UniquePrefix()
	rawURL := c.URLWithPrefix(prefix)
	s := mustOpen(t, rawURL)
	ctx := context.Background()
	sessions := []string{"s1", "team/alpha:42", "x.y@z+w-v_u"}
	for _, id := range sessions {
		if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
		res, err := s.Admit(ctx, []backend.AdmitRequest{
			{Session: id, Kind: backend.KindHuman, Principal: "alice", RequestID: "r", Payload: backendtest.Payload("hi")},
			{Session: id, Kind: backend.KindAutomation, Producer: "p", Principal: "alice", Identities: []string{"a", "b"}, Payload: backendtest.Payload("auto")},
		})
		if err != nil || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("admit: %v %+v", err, res)
		}
		l, err := s.AcquireLease(ctx, backend.LeaseRequest{Principal: "alice", Session: id, Holder: "h", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Settle(ctx, backend.SettleRequest{Session: id, AdmissionID: res[0].Admission.ID, Epoch: l.Epoch, Direct: true,
			Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: id,
			Messages: []backend.NewMessage{{Transcript: id, Role: backend.RoleNote, Content: "n"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddViewer(ctx, id, time.Minute, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Compress(ctx, id, id+".2", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	var all []string
	for i := range c.Addrs() {
		out, err := c.Do(i, "KEYS", prefix+":{*")
		if err != nil {
			t.Fatal(err)
		}
		if out != "" {
			all = append(all, strings.Split(out, "\n")...)
		}
	}
	perSession := map[string]int{}
	for _, key := range all {
		sess := key[len(prefix)+2 : strings.Index(key, "}")]
		perSession[sess]++
		slotKey, err := c.Do(0, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			t.Fatal(err)
		}
		slotSess, err := c.Do(0, "CLUSTER", "KEYSLOT", "{"+sess+"}")
		if err != nil {
			t.Fatal(err)
		}
		if slotKey != slotSess {
			t.Errorf("key %q is in slot %s, its session %q in slot %s", key, slotKey, sess, slotSess)
		}
	}
	for _, id := range sessions {
		if perSession[id] < 8 {
			t.Errorf("session %s has %d keys, want its whole state (≥ 8) under its tag: %v", id, perSession[id], all)
		}
	}
}

func TestSubscribeCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	s := mustOpen(t, c.FreshURL())
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, _, err := s.OpenSession(context.Background(), backend.OpenSessionRequest{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	timeout := time.After(20 * time.Second)
	for len(seen) < 4 {
		select {
		case id := <-ch:
			seen[id] = true
		case <-timeout:
			t.Fatalf("saw changes of %v only", seen)
		}
	}
	cancel()
	for range ch {
	}
}

func TestConformanceSentinel(t *testing.T) {
	srv := redistest.Start(t)
	se := srv.StartSentinel(t)
	s := mustOpen(t, se.FreshURL())
	ctx := context.Background()
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatalf("through the Sentinel: %v", err)
	}
	// The data is on the master the Sentinel names.
	if out, err := srv.Do("KEYS", "*{s1}:session"); err != nil || out == "" {
		t.Fatalf("the session is not on the master: %q, %v", out, err)
	}
	backendtest.RunConformanceTests(t, func(t *testing.T) backend.Store { return mustOpen(t, se.FreshURL()) })
}

// TestClusterNodeDown: with one master of three killed, sessions on the
// other masters keep working and those on the dead one fail with
// ErrUnavailable (never another code, never a hang).
func TestClusterNodeDown(t *testing.T) {
	c := redistest.StartCluster(t)
	s, err := open(t, c.FreshURL(), backend.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var ids []string
	for i := 0; i < 24; i++ {
		id := fmt.Sprintf("s%d", i)
		ids = append(ids, id)
		if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	c.KillNode(0)
	var ok, down int
	for _, id := range ids {
		done := make(chan error, 1)
		go func() {
			res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: id, Kind: backend.KindHuman, Principal: "alice", Payload: backendtest.Payload("x")}})
			if err == nil {
				err = res[0].Err
			}
			done <- err
		}()
		select {
		case err := <-done:
			switch {
			case err == nil:
				ok++
			case errors.Is(err, backend.ErrUnavailable):
				down++
			default:
				t.Errorf("admit to %s with a master down: %v, want success or ErrUnavailable", id, err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("admit to %s with a master down hangs", id)
		}
	}
	if down == 0 {
		t.Errorf("no admit failed with a master of three down (%d succeeded)", ok)
	}
	t.Logf("with one master down: %d admits succeeded, %d unavailable", ok, down)
}

// TestOrphanTranscriptClaim: a transcript id claimed by a session that never
// created it (its script refused, or its process died) blocks the id only
// for a while; a live claim, or a transcript that exists, blocks it for good.
func TestOrphanTranscriptClaim(t *testing.T) {
	srv := redistest.Start(t)
	prefix := redistest.UniquePrefix()
	s := mustOpen(t, srv.URLWithPrefix(prefix))
	ctx := context.Background()
	claim := func(t, session string, at time.Time) {
		if _, err := srv.Do("SET", prefix+":transcript:{"+t+"}", session+" "+strconv.FormatInt(at.UnixNano(), 10)); err != nil {
			panic(err)
		}
	}
	claim("young", "ghost", time.Now())
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "young", Owner: "alice"}); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("open over a fresh claim of another session: %v, want ErrConflict", err)
	}
	claim("old", "ghost", time.Now().Add(-time.Hour))
	if _, created, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "old", Owner: "alice"}); err != nil || !created {
		t.Errorf("open over an hour-old orphan claim: created %v, %v; want created", created, err)
	}
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	claim("s1", "s1", time.Now().Add(-time.Hour))
	if _, err := s.Switch(ctx, "old", "s1", time.Time{}); !errors.Is(err, backend.ErrConflict) {
		t.Errorf("switch to another session's existing transcript: %v, want ErrConflict", err)
	}
}

// A store already holding a loop in a lineage (planted past every check).
func TestDamagedLineage(t *testing.T) {
	srv := redistest.Start(t)
	admissiontest.RunDamagedLineage(t, func(t *testing.T) backend.Store { return mustOpen(t, srv.FreshURL()) }, redisstore.SetLineageForTest)
}

// The prefix reaches SCAN MATCH escaped, never as a
// glob: doctor on the store of prefix "h*" checks its own keys only, not
// those of the store of prefix "hb" on the same server.
func TestDoctorPrefixIsNotAGlob(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	other := mustOpen(t, srv.URLWithPrefix("hb"))
	if _, _, err := other.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"h*", "h?", "h[b]", `h\`} {
		st := mustOpen(t, srv.URLWithPrefix(prefix))
		findings, err := st.(backend.Doctor).Doctor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, f := range findings {
			if f.Check == "orphaned lookups" {
				got = f.Detail
			}
		}
		if !strings.HasPrefix(got, "0 keys checked") {
			t.Errorf("doctor of prefix %q: %q, want 0 keys checked (the store is empty)", prefix, got)
		}
	}
}
