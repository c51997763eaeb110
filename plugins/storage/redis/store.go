// Package redis is the Redis store of hermesq (standalone, Sentinel or
// Cluster). Every state change of the contract is one Lua script of
// scripts/, run on the session's slot: all keys of a session share the hash
// tag {<session>} (keys.go). Global lookups that cannot share that slot
// (admission id, transcript id, identity → sessions, the session index) are
// written idempotently before the script runs, and verified when read.
//
// Each method of the Store is in the file named for its part of the
// contract, as in every store: sessions.go, access.go, admit.go,
// admissions.go, lease.go, claim.go, settle.go, settle_run.go,
// settle_claim.go, subscribe.go, transcripts.go, viewers.go, export.go,
// import.go, compact.go, size.go. scripts.go composes and runs the
// scripts; records.go encodes what they store.
package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/hermesq/hermesq/pkg/backend"
)

// DefaultTimeout bounds a dial, read or write when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// DefaultPrefix is the key prefix when the URL has no ?prefix=.
const DefaultPrefix = "hermesq"

// Store is a backend.Store on Redis.
type Store struct {
	client  goredis.UniversalClient
	k       keys
	timeout time.Duration
	desc    string // redacted URL, for messages
	db      int    // database number, for messages
	admits  admitGroup
	// oneServer: every key is on one server (standalone or Sentinel, not
	// a Cluster), so a script may write the global lookups too.
	oneServer bool
	// compactStep sizes each compact script call (compact.go).
	compactStep stepSizer
}

var _ backend.Store = (*Store)(nil)

// knownParams are the query parameters a store URL may carry.
var knownParams = []string{"prefix", "ca", "cert", "key", "insecure_skip_verify", "server_name", "cluster", "sentinel"}

var quietOnce sync.Once

// Opener opens a Redis store from redis://[user:pass@]host:port[,host:port…]/db?…
// or rediss://… (TLS). Query parameters: prefix (key prefix, default
// "hermesq"); for rediss: ca, cert, key, insecure_skip_verify, server_name;
// cluster=1 (also implied by several hosts) for a Redis Cluster;
// sentinel=MASTER to reach MASTER through the listed Sentinels.
func Opener(ctx context.Context, u *url.URL, opts backend.Options) (backend.Store, error) {
	s, err := Open(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Config is a parsed store URL.
type Config struct {
	Hosts    []string
	Username string
	Password string
	DB       int
	Prefix   string
	TLS      *tls.Config
	Cluster  bool
	Sentinel string // master name
	Redacted string
}

// String describes the configuration without its password.
func (c Config) String() string { return "redis config for " + c.Redacted }

// Format prints String for every verb (%v, %+v, %#v, %d…) of a Config or a
// *Config, so no way of printing one shows its password.
func (c Config) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// ParseURL parses and checks a store URL without connecting.
func ParseURL(u *url.URL) (*Config, error) {
	red := backend.RedactURL(u)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("redis: store url %q: %s: %w", red, fmt.Sprintf(format, args...), backend.ErrInvalid)
	}
	// fileErr is a TLS file that could not be read, or is too big (it
	// says so itself).
	fileErr := func(what string, err error) error {
		if errors.Is(err, backend.ErrInvalid) {
			return fmt.Errorf("redis: store url %q: %w", red, err)
		}
		return bad("read %s: %v", what, err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, bad("scheme %q is not redis or rediss", u.Scheme)
	}
	if err := backend.CheckQuery(u, knownParams...); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	q := u.Query()
	c := &Config{Prefix: DefaultPrefix, Redacted: red}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
		if _, set := u.User.Password(); !set {
			// redis://:pass@ and redis://pass@ are both read as a password
			// for the default user, as redis-cli does.
			c.Password, c.Username = c.Username, ""
		}
	}
	if u.Host == "" {
		return nil, bad("no host")
	}
	seen := map[string]bool{}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, bad("empty host in %q", u.Host)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			// No port: the default one. An IPv6 address keeps its
			// brackets in the URL ([::1]), not in the host.
			bare := h
			if strings.HasPrefix(bare, "[") && strings.HasSuffix(bare, "]") {
				bare = bare[1 : len(bare)-1]
			}
			h = net.JoinHostPort(bare, "6379")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return nil, bad("bad host %q", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, bad("bad port in %q", h)
		}
		if seen[h] {
			return nil, bad("host %s is listed twice", h)
		}
		seen[h] = true
		c.Hosts = append(c.Hosts, h)
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return nil, bad("database %q is not a database number (0, 1, 2…)", db)
		}
		c.DB = n
	}
	if p, ok := q["prefix"]; ok {
		c.Prefix = p[0]
		if c.Prefix == "" || strings.ContainsAny(c.Prefix, "{} \t\r\n") {
			return nil, bad("prefix %q must be non-empty without braces or spaces", c.Prefix)
		}
	}
	if v := q.Get("cluster"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, bad("cluster=%q is not a boolean", v)
		}
		c.Cluster = b
	}
	if len(c.Hosts) > 1 && q.Get("sentinel") == "" {
		c.Cluster = true
	}
	if _, ok := q["sentinel"]; ok {
		c.Sentinel = q.Get("sentinel")
		if c.Sentinel == "" {
			return nil, bad("sentinel needs the master name")
		}
		if c.Cluster {
			return nil, bad("sentinel and cluster exclude each other")
		}
	}
	if c.Cluster && c.DB != 0 {
		return nil, bad("a Redis Cluster has only database 0")
	}
	tlsKeys := []string{"ca", "cert", "key", "insecure_skip_verify", "server_name"}
	if u.Scheme == "redis" {
		for _, k := range tlsKeys {
			if _, ok := q[k]; ok {
				return nil, bad("%s= needs the rediss:// scheme", k)
			}
		}
		return c, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := q.Get("ca"); ca != "" {
		pem, err := backend.ReadFileLimit("ca file", ca, backend.MaxUserFile)
		if err != nil {
			return nil, fileErr("ca file", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, bad("ca file %q holds no PEM certificate", ca)
		}
		tc.RootCAs = pool
	}
	cert, key := q.Get("cert"), q.Get("key")
	if (cert == "") != (key == "") {
		return nil, bad("cert= and key= go together")
	}
	if cert != "" {
		// Read with a bound (cert=/dev/zero), as tls.LoadX509KeyPair does not.
		certPEM, err := backend.ReadFileLimit("cert file", cert, backend.MaxUserFile)
		if err != nil {
			return nil, fileErr("cert file", err)
		}
		keyPEM, err := backend.ReadFileLimit("key file", key, backend.MaxUserFile)
		if err != nil {
			return nil, fileErr("key file", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, bad("load client certificate: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if v := q.Get("insecure_skip_verify"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, bad("insecure_skip_verify=%q is not a boolean", v)
		}
		tc.InsecureSkipVerify = b
	}
	if sn := q.Get("server_name"); sn != "" {
		tc.ServerName = sn
	} else if host, _, err := net.SplitHostPort(c.Hosts[0]); err == nil {
		tc.ServerName = host
	}
	c.TLS = tc
	return c, nil
}

// Open connects to the Redis store of u and checks it answers.
func Open(ctx context.Context, u *url.URL, opts backend.Options) (*Store, error) {
	c, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	// go-redis logs reconnect attempts on its own; hermesq reports errors
	// itself, once, on stderr.
	quietOnce.Do(func() { goredis.SetLogger(quietLogger{}) })
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	s := &Store{k: keys{prefix: c.Prefix}, timeout: timeout, desc: c.Redacted, db: c.DB, oneServer: !c.Cluster, admits: admitGroup{relay: make(chan struct{})}}
	maint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	switch {
	case c.Cluster:
		s.client = goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: c.Hosts, Username: c.Username, Password: c.Password, TLSConfig: c.TLS,
			// A script is never re-sent after a network error (noRetryCmd);
			// MOVED and ASK, which mean it did not run, are followed.
			MaxRedirects: 3, MaxRetries: -1,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			DialerRetries: 1, Protocol: 2, DisableIdentity: true, MaintNotificationsConfig: maint,
			ContextTimeoutEnabled: true, // a call's deadline bounds it (a lease renewal)
		})
	case c.Sentinel != "":
		s.client = goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: c.Sentinel, SentinelAddrs: c.Hosts,
			Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: c.TLS,
			MaxRetries:  -1, // as below
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			DialerRetries: 1, Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true,
		})
	default:
		s.client = goredis.NewClient(&goredis.Options{
			Addr: c.Hosts[0], Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: c.TLS,
			MaxRetries:  -1, // scripts are never re-sent blindly; reads retry in readRetry
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolTimeout: timeout,
			DialerRetries: 1, Protocol: 2, DisableIdentity: true, MaintNotificationsConfig: maint,
			ContextTimeoutEnabled: true,
		})
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.client.Ping(pctx).Err(); err != nil {
		_ = s.client.Close()
		return nil, s.wrap("open", err)
	}
	return s, nil
}

// String describes the store with its password redacted.
func (s *Store) String() string { return "redis store " + s.desc }

// Close releases the client's connections.
func (s *Store) Close() error { return s.client.Close() }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}

// wrap maps a client error to the contract's error codes, naming the
// operation. The password never appears: go-redis errors do not carry it
// and the URL is always redacted.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if backend.CodeOf(err) != backend.CodeInternal || errors.Is(err, backend.ErrInternal) {
		return err // already one of ours
	}
	// A certificate the client does not accept is a setting to fix, not a
	// transient failure: retrying later (exit 75) would only repeat it.
	// Checked first, whatever network error wraps it.
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return fmt.Errorf("redis: %s on %s: the server's TLS certificate is not trusted (%v): "+
			"give the CA that signed it with ?ca=FILE, or the name it was issued for with ?server_name=NAME: %w",
			op, s.desc, cv.Err, backend.ErrInternal)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "DB index is out of range"):
		// SELECT of a database the server does not have: a setting to fix.
		return fmt.Errorf("redis: %s on %s: the server has no database %d (its 'databases' setting; the default is 16, numbered from 0): %w",
			op, s.desc, s.db, backend.ErrInvalid)
	case strings.Contains(msg, "cluster support disabled"):
		// cluster=1 (or several hosts) against a standalone server: a
		// setting to fix.
		return fmt.Errorf("redis: %s on %s: the server is not a Redis Cluster (%s): name one host without cluster=1, or the nodes of a cluster: %w",
			op, s.desc, msg, backend.ErrInvalid)
	case strings.HasPrefix(msg, "NOPERM"):
		// Authenticated, but the ACL of the user forbids a command, key or
		// channel: the password is right, the permissions are not.
		return fmt.Errorf("redis: %s on %s: the server's ACL refuses the store url's user (%s): "+
			"give it every command on the keys and channels of its prefix: %w", op, s.desc, msg, backend.ErrForbidden)
	case strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "WRONGPASS"),
		strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
		return fmt.Errorf("redis: %s on %s: authentication refused (%s): check the user and password of the store url: %w",
			op, s.desc, firstWord(msg), backend.ErrForbidden)
	case isTransient(err):
		return fmt.Errorf("redis: %s on %s: %v: %w", op, s.desc, err, backend.ErrUnavailable)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("redis: %s: %w: %w", op, err, backend.ErrUnavailable)
	}
	return fmt.Errorf("redis: %s on %s: %v: %w", op, s.desc, err, backend.ErrInternal)
}

func firstWord(s string) string {
	if i := strings.IndexByte(s, ' '); i > 0 {
		return s[:i]
	}
	return s
}

// isTransient reports whether err is a failure the same call may survive
// later: the server unreachable, restarting, loading, failing over.
func isTransient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) ||
		errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "BUSY", "MOVED", "ASK"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "all sentinels are unreachable") || strings.Contains(msg, "no reachable")
}

func errInternalf(format string, args ...any) error {
	return fmt.Errorf("redis: "+format+": %w", append(args, backend.ErrInternal)...)
}

// readRetry runs an idempotent read, retrying a transient failure twice.
func (s *Store) readRetry(ctx context.Context, op string, fn func() error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return s.wrap(op, err)
			case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
			}
		}
		err = fn()
		if err == nil || !isTransient(err) || backend.CodeOf(err) != backend.CodeInternal {
			break
		}
	}
	return s.wrap(op, err)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
