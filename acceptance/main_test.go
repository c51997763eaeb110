// Package acceptance runs hermesq end to end: the real binary, built once per
// test binary, against real stores (a bbolt file in a temp dir, a real
// redis-server started by the test), driven the way shell scripts and cron
// jobs drive it.
package acceptance

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hermesq/hermesq/internal/redistest"
)

// binDir holds the binaries built for this test binary; removed by TestMain.
var binDir struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir.dir != "" {
		os.RemoveAll(binDir.dir)
	}
	os.Exit(code)
}

// buildAll builds cmd/hermesq, cmd/hermesq-producers and cmd/hermesq-top (side by side, as
// installed), examples/handler, the producer plugins and
// the misbehaving test plugin into one temp dir, once.
func buildAll() (string, error) {
	binDir.once.Do(func() {
		dir, err := os.MkdirTemp("", "hermesq-acceptance-bin-")
		if err != nil {
			binDir.err = err
			return
		}
		binDir.dir = dir
		for _, b := range []struct{ pkg, name string }{
			{"./cmd/hermesq", "hermesq"},
			{"./cmd/hermesq-producers", "hermesq-producers"},
			{"./cmd/hermesq-top", "hermesq-top"},
			{"./examples/handler", "handler"},
			{"./plugins/producers/delegation", "hermesq-producer-delegation"},
			{"./plugins/producers/process", "hermesq-producer-process"},
			{"./plugins/producers/watch", "hermesq-producer-watch"},
			{"./acceptance/testdata/badproducer", "badproducer"},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.name), b.pkg)
			cmd.Dir = ".." // the module root
			if out, err := cmd.CombinedOutput(); err != nil {
				binDir.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	return binDir.dir, binDir.err
}

// hermesqBin returns the path of the hermesq binary, built from ./cmd/hermesq
// once per test binary (a plain build, not -race) into a temp dir.
func hermesqBin(t testing.TB) string {
	t.Helper()
	dir, err := buildAll()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "hermesq")
}

// handlerBin returns the path of the example turn handler (examples/handler),
// built once beside the hermesq binary.
func handlerBin(t testing.TB) string {
	t.Helper()
	dir, err := buildAll()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "handler")
}

// store is one kind of store the acceptance tests run on.
type store struct {
	Name string // "bbolt" or "redis"
	// URL returns the URL of a fresh, empty store for t: a bbolt file in
	// t.TempDir(), or a unique key prefix on the redis-server this store
	// shares between the tests of storeURLs' caller. For redis it skips t
	// when redis-server is missing (fails it with CI=true).
	URL func(t testing.TB) string
}

// storeURLs yields the stores to run on: bbolt, then redis. parent bounds
// the life of the redis-server (started on first use, stopped when parent
// ends), so call it from the test whose subtests use the stores:
//
//	for _, s := range storeURLs(t) {
//		t.Run(s.Name, func(t *testing.T) { u := s.URL(t); … })
//	}
func storeURLs(parent testing.TB) []store {
	var (
		mu   sync.Mutex
		base string
	)
	redisURL := func(t testing.TB) string {
		t.Helper()
		redistest.Require(t)
		mu.Lock()
		defer mu.Unlock()
		if base == "" {
			base = redistest.Start(parent).URL()
		}
		return withPrefix(t, base)
	}
	return []store{
		{Name: "bbolt", URL: func(t testing.TB) string {
			return "bbolt://" + filepath.Join(t.TempDir(), "hermesq.db")
		}},
		{Name: "redis", URL: redisURL},
	}
}

var prefixSeq atomic.Int64

// withPrefix returns the redis URL u with a key prefix no other test uses.
func withPrefix(t testing.TB, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatalf("redistest url %q: %v", u, err)
	}
	q := pu.Query()
	p := q.Get("prefix")
	if p == "" {
		p = "hq"
	}
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	q.Set("prefix", fmt.Sprintf("%s-%s-%d", p, name, prefixSeq.Add(1)))
	pu.RawQuery = q.Encode()
	return pu.String()
}
