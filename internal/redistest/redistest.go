// Package redistest starts real redis-server processes for tests: standalone
// servers (optionally with AOF, an ACL user or TLS) and three-master
// Clusters, each on free loopback ports in its own t.TempDir(), stopped by
// t.Cleanup. It never touches a Redis it did not start.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyTimeout bounds how long a server may take to answer PING.
const readyTimeout = 20 * time.Second

// InCI reports whether the tests run in CI (CI=true), where nothing that
// needs redis-server may be skipped.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipRequested reports whether the caller asked, with HERMESQ_SKIP_REDIS=1,
// to skip the tests that need redis-server (a machine without Redis).
func SkipRequested() bool { return os.Getenv("HERMESQ_SKIP_REDIS") == "1" }

var skipNotice sync.Once

// Require makes sure redis-server and redis-cli can be run. A test that
// needs them never skips silently: without them it fails, unless
// HERMESQ_SKIP_REDIS=1 asks for the skip, which is then announced on
// stderr once per test binary and in the skip message. With CI=true a
// missing Redis fails whatever HERMESQ_SKIP_REDIS says.
func Require(t testing.TB) {
	t.Helper()
	if SkipRequested() && !InCI() {
		skipNotice.Do(func() {
			fmt.Fprintln(os.Stderr, "redistest: HERMESQ_SKIP_REDIS=1: SKIPPING EVERY TEST THAT NEEDS REDIS: the Redis store is NOT tested")
		})
		t.Skip("HERMESQ_SKIP_REDIS=1: the Redis store is NOT tested")
	}
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: install redis-server and redis-tools, or set HERMESQ_SKIP_REDIS=1 to skip the Redis tests (never with CI=true)", bin)
		}
	}
}

// Option configures a standalone server.
type Option func(*config)

type config struct {
	aof      bool
	user     string
	password string
	tls      bool
}

// WithAOF turns on the append-only file with appendfsync always, so a
// SIGKILL loses no acknowledged write.
func WithAOF() Option { return func(c *config) { c.aof = true } }

// WithACL disables the default user and creates user with password and
// every permission: clients must authenticate as user.
func WithACL(user, password string) Option {
	return func(c *config) { c.user, c.password = user, password }
}

// WithTLS serves TLS only (tls-port), with a CA and server certificate
// generated into the server's directory. Start skips (or fails in CI) when
// the installed redis-server was built without TLS.
func WithTLS() Option { return func(c *config) { c.tls = true } }

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	cfg  config
	dir  string
	port int
	// TLS holds the generated CA and certificates when started WithTLS.
	TLS *TLSFiles

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	prefix string
}

// Start starts a standalone redis-server and stops it when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	Require(t)
	s := &Server{t: t, dir: t.TempDir(), prefix: UniquePrefix()}
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.tls {
		if !TLSSupported() {
			if InCI() || !SkipRequested() {
				t.Fatal("redis-server was built without TLS support (set HERMESQ_SKIP_REDIS=1 to skip the Redis tests; never with CI=true)")
			}
			t.Skip("HERMESQ_SKIP_REDIS=1 and redis-server was built without TLS support: TLS is NOT tested")
		}
		files, err := GenerateTLS(s.dir)
		if err != nil {
			t.Fatalf("redistest: generate TLS files: %v", err)
		}
		s.TLS = files
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort(false)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.port = port
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

func (s *Server) confLines() []string {
	lines := []string{
		"bind 127.0.0.1",
		"protected-mode no",
		"daemonize no",
		"save \"\"",
		"dir " + s.dir,
		"logfile " + filepath.Join(s.dir, "redis.log"),
		"dbfilename dump.rdb",
	}
	if s.cfg.tls {
		lines = append(lines,
			"port 0",
			"tls-port "+strconv.Itoa(s.port),
			"tls-cert-file "+s.TLS.ServerCert,
			"tls-key-file "+s.TLS.ServerKey,
			"tls-ca-cert-file "+s.TLS.CA,
			"tls-auth-clients no",
		)
	} else {
		lines = append(lines, "port "+strconv.Itoa(s.port))
	}
	if s.cfg.aof {
		lines = append(lines, "appendonly yes", "appendfsync always", "appenddirname appendonly")
	} else {
		lines = append(lines, "appendonly no")
	}
	if s.cfg.user != "" {
		lines = append(lines,
			"user default off",
			fmt.Sprintf("user %s on >%s ~* &* +@all", s.cfg.user, s.cfg.password),
		)
	}
	return lines
}

func (s *Server) start() error {
	conf := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(strings.Join(s.confLines(), "\n")+"\n"), 0o600); err != nil {
		return err
	}
	cmd, exited, err := spawn(s.dir, "redis-server", conf)
	if err != nil {
		return err
	}
	if err := waitReady(exited, func() error { return s.ping() }); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%w\n%s", err, tail(filepath.Join(s.dir, "redis.log")))
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

func (s *Server) ping() error {
	return Ping(s.Addr(), s.cfg.user, s.cfg.password, s.TLS)
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.dir }

// URL is the store URL of the server with the server's own unique prefix:
// redis://[user:pass@]127.0.0.1:PORT/0?prefix=…, or rediss://…&ca=… with
// TLS. Every call returns the same store.
func (s *Server) URL() string { return s.URLWithPrefix(s.prefix) }

// FreshURL returns a URL with a new unique prefix: an empty store on the
// same server, so many tests can share one server.
func (s *Server) FreshURL() string { return s.URLWithPrefix(UniquePrefix()) }

// URLWithPrefix returns the server's URL with the given key prefix.
func (s *Server) URLWithPrefix(prefix string) string {
	u := url.URL{Scheme: "redis", Host: s.Addr(), Path: "/0"}
	if s.cfg.user != "" {
		u.User = url.UserPassword(s.cfg.user, s.cfg.password)
	}
	q := url.Values{}
	q.Set("prefix", prefix)
	if s.TLS != nil {
		u.Scheme = "rediss"
		q.Set("ca", s.TLS.CA)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Kill kills the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Restart starts the server again on the same port with the same directory
// (so an AOF is replayed), killing it first if it runs, and waits until it
// answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	deadline := time.Now().Add(readyTimeout)
	for {
		// The port may linger briefly after the kill; retry until it binds.
		if err = s.start(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the server (SIGKILL: the test data is disposable).
func (s *Server) Stop() { s.Kill() }

// UniquePrefix returns a key prefix no other test uses.
func UniquePrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "hqt" + hex.EncodeToString(b[:])
}

// FreePort returns a free loopback port. With bus, port+10000 (a Cluster
// node's bus port) is free too.
func FreePort(bus bool) (int, error) {
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port == 6379 || port == 16379 {
			continue
		}
		if bus {
			if port+10000 > 65535 {
				continue
			}
			lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
			if err != nil {
				continue
			}
			_ = lb.Close()
		}
		return port, nil
	}
	return 0, errors.New("no free loopback port")
}

// spawn starts a process in dir and returns a channel closed when it exits.
func spawn(dir, name string, args ...string) (*exec.Cmd, chan struct{}, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return cmd, exited, nil
}

// waitReady polls ping until it succeeds, the process exits, or the
// deadline passes.
func waitReady(exited <-chan struct{}, ping func() error) error {
	deadline := time.Now().Add(readyTimeout)
	var err error
	for {
		if err = ping(); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server not ready after %s: %v", readyTimeout, err)
		}
	}
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// Ping sends PING (after AUTH when user is set) over a fresh connection and
// expects +PONG. A server still loading its AOF answers -LOADING: not ready.
func Ping(addr, user, password string, tlsFiles *TLSFiles) error {
	_, err := Command(addr, user, password, tlsFiles, "PING")
	return err
}

// Command sends one command over a fresh connection and returns its reply
// as text (bulk strings and status replies; arrays are joined by newlines).
func Command(addr, user, password string, tlsFiles *TLSFiles, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if tlsFiles != nil {
		tc, err := tlsFiles.client(conn)
		if err != nil {
			return "", err
		}
		conn = tc
	}
	rd := bufio.NewReader(conn)
	if user != "" {
		if _, err := roundTrip(conn, rd, "AUTH", user, password); err != nil {
			return "", err
		}
	}
	return roundTrip(conn, rd, args...)
}

func roundTrip(conn net.Conn, rd *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(rd)
}

func readReply(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, max(n, 0))
		for i := 0; i < n; i++ {
			p, err := readReply(rd)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func ioReadFull(rd *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := rd.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Do runs one command on the server (authenticated as its ACL user) and
// returns the reply as text.
func (s *Server) Do(args ...string) (string, error) {
	return Command(s.Addr(), s.cfg.user, s.cfg.password, s.TLS, args...)
}
