package bbolt_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

// The test binary doubles as a helper process: with HERMESQ_BBOLT_HELPER
// set it runs one helper mode instead of the tests.
const helperEnv = "HERMESQ_BBOLT_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper modes:
//
//	hold-bolt:  open the db with bbolt directly, print "ready", hold it until stdin closes
//	hold-lock:  take the store's sidecar lock, print "ready", hold it until stdin closes
//	admit:N:S:  admit N inputs to session S, one call each, print "done" and the slowest call
func runHelper(mode, path string) error {
	parts := strings.Split(mode, ":")
	switch parts[0] {
	case "hold-bolt":
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer db.Close()
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return nil
	case "hold-lock":
		fd, err := unix.Open(path+".lock", unix.O_RDWR|unix.O_CREAT, 0o600)
		if err != nil {
			return err
		}
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			return err
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return nil
	case "admit":
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			return err
		}
		ctx := context.Background()
		s, err := boltstore.Open(ctx, path, backend.Options{Timeout: 20 * time.Second})
		if err != nil {
			return err
		}
		defer s.Close()
		pid := os.Getpid()
		var slowest time.Duration
		for i := 0; i < n; i++ {
			began := time.Now()
			res, err := s.Admit(ctx, []backend.AdmitRequest{{
				Session: parts[2], Kind: backend.KindAutomation, Producer: "process", Principal: "alice",
				Identities: []string{fmt.Sprintf("p%d-%d", pid, i)}, Payload: []byte(fmt.Sprintf(`{"text":"%d-%d"}`, pid, i)),
			}})
			if err == nil {
				err = res[0].Err
			}
			if err != nil {
				return fmt.Errorf("admit %d: %w", i, err)
			}
			slowest = max(slowest, time.Since(began))
		}
		fmt.Println("done", slowest.Round(time.Millisecond))
		return nil
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// helper starts the test binary in a helper mode on path.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startHelper(t *testing.T, mode, path string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", path)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

// expect reads the helper's next line, requires its first word to be
// want, and returns the rest.
func (h *helper) expect(t *testing.T, want string) string {
	t.Helper()
	line, err := h.out.ReadString('\n')
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	if err != nil || word != want {
		t.Fatalf("helper %v: got %q, %v; want %q", h.cmd.Args, line, err, want)
	}
	return rest
}

// stop lets a holding helper go and waits for it.
func (h *helper) stop(t *testing.T) {
	t.Helper()
	_ = h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper %v: %v", h.cmd.Args, err)
	}
}

func openAt(t *testing.T, path string, timeout time.Duration) (*boltstore.Store, error) {
	t.Helper()
	s, err := boltstore.Open(context.Background(), path, backend.Options{Timeout: timeout})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

func TestLockWaitBoundedWhenAnotherProcessHoldsTheFile(t *testing.T) {
	for _, mode := range []string{"hold-bolt", "hold-lock"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hermesq.db")
			s, err := openAt(t, path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			h := startHelper(t, mode, path)
			h.expect(t, "ready")

			_, err = openAt(t, path, 300*time.Millisecond)
			if !errors.Is(err, backend.ErrUnavailable) {
				t.Fatalf("open while another process holds the file: %v, want ErrUnavailable", err)
			}
			_, err = s.GetSession(context.Background(), "s1", time.Time{})
			if !errors.Is(err, backend.ErrUnavailable) {
				t.Fatalf("read while another process holds the file: %v, want ErrUnavailable", err)
			}
			res, err := s.Admit(context.Background(), []backend.AdmitRequest{{Session: "s1", Kind: backend.KindHuman, Principal: "alice", Payload: []byte(`{"text":"x"}`), CreateSession: true}})
			if !errors.Is(err, backend.ErrUnavailable) || res != nil {
				t.Fatalf("admit while another process holds the file: %v %v, want ErrUnavailable and no results", res, err)
			}

			h.stop(t)
			res, err = s.Admit(context.Background(), []backend.AdmitRequest{{Session: "s1", Kind: backend.KindHuman, Principal: "alice", Payload: []byte(`{"text":"x"}`), CreateSession: true}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("admit after the other process let go: %v %v", err, res)
			}
		})
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "hermesq")
	path := filepath.Join(dir, "hermesq.db")
	if _, err := openAt(t, path, 0); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, path + ".lock": 0o600, dir: 0o700 | os.ModeDir, filepath.Dir(dir): 0o700 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
}

func TestUnreadablePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(file, "hermesq.db") // a path under a regular file
	_, err := openAt(t, path, time.Second)
	if !errors.Is(err, backend.ErrInternal) || !strings.Contains(err.Error(), path) {
		t.Fatalf("open %s: %v, want ErrInternal naming the path", path, err)
	}
	dir := t.TempDir()
	_, err = openAt(t, dir, time.Second)
	if !errors.Is(err, backend.ErrInternal) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("open a directory: %v, want ErrInternal naming the path", err)
	}
}

func TestNotAStore(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]func(path string) error{
		"text file": func(p string) error {
			return os.WriteFile(p, []byte(strings.Repeat("this is not a database\n", 1000)), 0o600)
		},
		"short file": func(p string) error { return os.WriteFile(p, []byte("hello"), 0o600) },
		"other bbolt file": func(p string) error {
			db, err := bolt.Open(p, 0o600, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
		},
		"newer schema": func(p string) error {
			s, err := boltstore.Open(context.Background(), p, backend.Options{})
			if err != nil {
				return err
			}
			_ = s.Close()
			db, err := bolt.Open(p, 0o600, nil)
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte{0, 0, 0, 0, 0, 0, 0, 99})
			})
		},
	}
	for name, make := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".db")
			if err := make(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			_, err := openAt(t, path, time.Second)
			if !errors.Is(err, backend.ErrInternal) || !strings.Contains(err.Error(), path) {
				t.Fatalf("open %s: %v, want ErrInternal naming the path", name, err)
			}
			if name == "newer schema" && !strings.Contains(err.Error(), "99") {
				t.Errorf("newer schema error does not name the version: %v", err)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("refused open changed the file")
			}
		})
	}
}

func TestCorruptFile(t *testing.T) {
	for _, which := range []string{"all pages", "data pages"} {
		t.Run(which, func(t *testing.T) { testCorrupt(t, which) })
	}
}

// testCorrupt scribbles over the pages of a store: every page but the two
// meta pages (bolt.Open fails or panics), or only its branch and leaf
// pages (the file opens; transactions panic).
func testCorrupt(t *testing.T, which string) {
	path := filepath.Join(t.TempDir(), "hermesq.db")
	s, err := openAt(t, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("s%02d", i)
		if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	var pages []int
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pageSize := db.Info().PageSize
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if which == "all pages" || p.Type == "branch" || p.Type == "leaf" {
				pages = append(pages, id)
			}
		}
	})
	_ = db.Close()
	if err != nil || len(pages) == 0 {
		t.Fatalf("pages to corrupt: %v %v", pages, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range pages {
		for i := id * pageSize; i < (id+1)*pageSize && i < len(data); i++ {
			data[i] = byte(i*7 + 13)
		}
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"open": func() error { _, err := openAt(t, path, time.Second); return err },
		"get":  func() error { _, err := s.GetSession(ctx, "s01", time.Time{}); return err },
		"list": func() error { _, err := s.ListSessions(ctx, time.Time{}); return err },
		"admit": func() error {
			_, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "s01", Kind: backend.KindHuman, Principal: "alice", Payload: []byte(`{"text":"x"}`)}})
			return err
		},
		"export": func() error {
			return s.Export(ctx, func(backend.Record) error { return nil })
		},
	}
	for _, name := range []string{"open", "get", "list", "admit", "export", "get"} {
		err := calls[name]()
		t.Logf("%s: %v", name, err)
		if !errors.Is(err, backend.ErrInternal) {
			t.Errorf("%s on a corrupt file: %v, want ErrInternal", name, err)
		}
	}
}

func TestOpener(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x", "hermesq.db")
	u := &url.URL{Scheme: "bbolt", Path: path}
	s, err := boltstore.Opener(ctx, u, backend.Options{})
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	_ = s.Close()
	r := backend.NewRegistry()
	r.Register("bbolt", boltstore.Opener)
	s, err = r.Open(ctx, "bbolt://"+path, backend.Options{})
	if err != nil {
		t.Fatalf("registry open: %v", err)
	}
	_ = s.Close()
	for _, bad := range []string{
		"bbolt://" + path + "?timeout=1s",
		"bbolt://" + path + "?nosync=1",
		"bbolt://relative/path.db",
		"bbolt:relative.db",
		"bbolt://./rel.db",
	} {
		if _, err := r.Open(ctx, bad, backend.Options{}); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("open %s: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := boltstore.Open(ctx, "relative.db", backend.Options{}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("open a relative path: %v, want ErrInvalid", err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/state-test")
	if p, err := boltstore.DefaultPath(); err != nil || p != "/var/state-test/hermesq/hermesq.db" {
		t.Errorf("DefaultPath with XDG_STATE_HOME: %q %v", p, err)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/someone")
	if p, err := boltstore.DefaultPath(); err != nil || p != "/home/someone/.local/state/hermesq/hermesq.db" {
		t.Errorf("DefaultPath without XDG_STATE_HOME: %q %v", p, err)
	}
}

func TestManyProcessesAdmitAtOnce(t *testing.T) {
	procs, each := 8, 200
	if testing.Short() {
		each = 50
	}
	path := filepath.Join(t.TempDir(), "hermesq.db")
	s, err := openAt(t, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var hs []*helper
	for i := 0; i < procs; i++ {
		hs = append(hs, startHelper(t, fmt.Sprintf("admit:%d:s1", each), path))
	}
	var slowest []string
	for _, h := range hs {
		slowest = append(slowest, h.expect(t, "done"))
		h.stop(t)
	}
	t.Logf("slowest admit of each process: %v", slowest)
	t.Logf("%d processes × %d admits: %v", procs, each, time.Since(start))
	all, err := s.ListAdmissions(ctx, "s1", backend.AdmissionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != procs*each {
		t.Fatalf("%d admissions, want %d", len(all), procs*each)
	}
	seen := map[string]bool{}
	for i, a := range all {
		if i > 0 && a.Seq <= all[i-1].Seq {
			t.Fatalf("seq %d after %d", a.Seq, all[i-1].Seq)
		}
		seen[a.Identities[0]] = true
	}
	if len(seen) != procs*each {
		t.Fatalf("%d distinct identities, want %d", len(seen), procs*each)
	}
}

func TestSubscribeSeesAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hermesq.db")
	s, err := openAt(t, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, id := range []string{"s1", "s2"} {
		if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: id, Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The subscription holds no lock: another process can write.
	h := startHelper(t, "admit:1:s2", path)
	h.expect(t, "done")
	committed := time.Now()
	h.stop(t)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case id := <-ch:
			if id == "s2" {
				t.Logf("reported %v after the other process's commit returned", time.Since(committed))
				return
			}
		case <-deadline:
			t.Fatal("another process's admit to s2 not reported within 20s")
		}
	}
}
