package backend

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options are the settings every store honours, whatever its URL.
type Options struct {
	// Timeout bounds how long one operation waits for the store: the bbolt
	// file lock, a Redis dial, read or write. Past it the operation fails
	// with ErrUnavailable. Zero means the store's default.
	Timeout time.Duration
	// MustExist opens an existing store only: a store that does not exist
	// is ErrNotFound and nothing is created (no file, no folder). Commands
	// that only read set it. A store that has no notion of creation
	// (Redis) ignores it.
	MustExist bool
}

// Opener opens a store from its URL. It rejects query parameters it does
// not know with ErrInvalid.
type Opener func(ctx context.Context, u *url.URL, opts Options) (Store, error)

// Registry maps URL schemes to openers. The CLI builds one and registers
// the concrete stores; nothing registers itself from init().
type Registry struct {
	mu      sync.RWMutex
	openers map[string]Opener
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{openers: map[string]Opener{}} }

// Register adds an opener for scheme (without "://").
func (r *Registry) Register(scheme string, o Opener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.openers[scheme] = o
}

// Schemes lists the registered schemes, sorted.
func (r *Registry) Schemes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.openers))
	for s := range r.openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open parses rawURL and opens the store its scheme names. An unparsable URL
// or an unknown scheme is ErrInvalid.
func (r *Registry) Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, Errorf(ErrInvalid, "store url %q", Redact(rawURL))
	}
	r.mu.RLock()
	o, ok := r.openers[u.Scheme]
	r.mu.RUnlock()
	if !ok {
		return nil, Errorf(ErrInvalid, "store url %q: unknown scheme %q (known: %v)", Redact(rawURL), u.Scheme, r.Schemes())
	}
	return o(ctx, u, opts)
}

// Redact returns rawURL without its credentials, for messages: see
// RedactURL. An unparsable URL is not shown at all.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable url)"
	}
	return RedactURL(u)
}

// redacted replaces a credential in a message.
const redacted = "xxxxx"

// plainParams are the query parameters of store URLs whose values are not
// secret (names, flags, file paths): they are shown as written. Every
// other parameter's value is redacted, whatever its name (password=,
// token=, a misspelt one): a parameter not known to be harmless may carry
// a credential.
var plainParams = map[string]bool{
	"prefix": true, "cluster": true, "sentinel": true,
	"ca": true, "cert": true, "key": true, "insecure_skip_verify": true, "server_name": true,
}

// RedactURL returns u as a string without its credentials, for messages:
// the password of user:password@ becomes "xxxxx", and so does a lone user
// part (user@), which a Redis URL reads as the password of the default
// user, as redis-cli does; so does the value of every query parameter
// not known to be harmless (plainParams: ?password=S3cr3t is shown
// ?password=xxxxx), and a fragment. Every message naming a store URL goes
// through here, so what counts as a credential is decided once.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if u.User != nil {
		if _, has := u.User.Password(); has {
			c.User = url.UserPassword(u.User.Username(), redacted)
		} else {
			c.User = url.User(redacted)
		}
	}
	if u.RawQuery != "" {
		c.RawQuery = redactQuery(u.RawQuery)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		c.Fragment, c.RawFragment = redacted, ""
	}
	return c.String()
}

// redactQuery redacts the values of a raw query (RedactURL), keeping its
// order and its keys; a key that cannot be decoded is redacted whole.
func redactQuery(raw string) string {
	pairs := strings.Split(raw, "&")
	for i, p := range pairs {
		k, _, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		switch {
		case err != nil:
			pairs[i] = redacted
		case plainParams[name]:
		case hasValue:
			pairs[i] = k + "=" + redacted
		}
	}
	return strings.Join(pairs, "&")
}

// URLSecrets lists the credentials RedactURL hides in rawURL (the
// password or lone user part, the values of parameters not known to be
// harmless, the fragment), for a caller that must keep them from being
// passed on (a handler's environment). An unparsable URL has none it can
// name.
func URLSecrets(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		} else {
			out = append(out, u.User.Username())
		}
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		k, v, hasValue := strings.Cut(p, "=")
		name, kerr := url.QueryUnescape(k)
		if kerr == nil && (plainParams[name] || !hasValue) {
			continue
		}
		if val, err := url.QueryUnescape(v); err == nil && val != "" {
			out = append(out, val)
		} else if p != "" {
			out = append(out, p)
		}
	}
	if u.Fragment != "" {
		out = append(out, u.Fragment)
	}
	return out
}

// CheckQuery returns ErrInvalid naming the first query parameter of u that
// is not in known, or is given more than once (prefix=a&prefix=b: which
// one was meant cannot be told), a query that cannot be decoded, and a
// fragment (#…), which no store reads: a URL is taken whole or refused,
// never partly ignored.
func CheckQuery(u *url.URL, known ...string) error {
	allowed := map[string]bool{}
	for _, k := range known {
		allowed[k] = true
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("store url %q: the query cannot be decoded: %w", RedactURL(u), ErrInvalid)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !allowed[k] {
			return fmt.Errorf("store url %q: unknown parameter %q: %w", RedactURL(u), k, ErrInvalid)
		}
		if len(q[k]) > 1 {
			return fmt.Errorf("store url %q: parameter %q is given %d times: %w", RedactURL(u), k, len(q[k]), ErrInvalid)
		}
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return fmt.Errorf("store url %q: a fragment (#…) is not part of a store url: %w", RedactURL(u), ErrInvalid)
	}
	return nil
}
