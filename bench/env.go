package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
	redisstore "github.com/hermesq/hermesq/plugins/storage/redis"
)

// env is what a run shares: a temp dir, the built binaries, the
// redis-servers (started on first use).
type env struct {
	dir     string
	repo    string // the hermesq repository, absolute
	hermesq string
	hello   string
	cobra   string                  // cmd/cobrahello: a cobra+viper CLI doing nothing
	plugins string                  // cmd/producerhello: a hello world linking the producer host
	stores  string                  // cmd/storehello: cmd/cobrahello linking hermesq's two stores
	servers map[string]*redisServer // "everysec", "always"
	n       int
}

func newEnv(repo string) (*env, error) {
	dir, err := os.MkdirTemp("", "hermesq-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, servers: map[string]*redisServer{}}
	abs, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	e.repo = abs
	e.hermesq = filepath.Join(dir, "hermesq")
	build := exec.Command("go", "build", "-o", e.hermesq, "./cmd/hermesq")
	build.Dir, build.Stderr = abs, os.Stderr
	if err := build.Run(); err != nil {
		e.close()
		return nil, fmt.Errorf("build hermesq in %s: %w", abs, err)
	}
	src := filepath.Join(dir, "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n"), 0o600); err != nil {
		return nil, err
	}
	e.hello = filepath.Join(dir, "hello")
	build = exec.Command("go", "build", "-o", e.hello, src)
	build.Dir, build.Stderr = dir, os.Stderr
	build.Env = append(os.Environ(), "GO111MODULE=off")
	if err := build.Run(); err != nil {
		e.close()
		return nil, fmt.Errorf("build hello world: %w", err)
	}
	e.cobra, e.plugins, e.stores = filepath.Join(dir, "cobrahello"), filepath.Join(dir, "producerhello"), filepath.Join(dir, "storehello")
	for name, out := range map[string]string{"cobrahello": e.cobra, "producerhello": e.plugins, "storehello": e.stores} {
		build = exec.Command("go", "build", "-o", out, "./cmd/"+name)
		build.Dir, build.Stderr = filepath.Join(abs, "bench"), os.Stderr
		if err := build.Run(); err != nil {
			e.close()
			return nil, fmt.Errorf("build %s: %w", name, err)
		}
	}
	return e, nil
}

func (e *env) close() {
	for _, s := range e.servers {
		s.stop()
	}
	_ = os.RemoveAll(e.dir)
}

// endFigure drops what a figure left: its Redis servers (with their data
// and append-only files) and its bbolt stores. Each figure then starts as
// it does alone (-only): figure 6 leaves 1,000,000 admissions on each store
// and figure 9 as many, and a Redis server still holding them forks and
// rewrites gigabytes in the background while the next figures measure
// (their longest calls and rates were several times worse than alone), as
// the pages of a bbolt file of a gigabyte crowd the page cache.
func (e *env) endFigure() {
	for kind, s := range e.servers {
		s.stop()
		_ = os.RemoveAll(s.dir)
		delete(e.servers, kind)
	}
	stores, _ := filepath.Glob(filepath.Join(e.dir, "store-*"))
	for _, f := range stores {
		_ = os.RemoveAll(f)
	}
}

// fresh returns a new path under the run's temp dir.
func (e *env) fresh(name string) string {
	e.n++
	return filepath.Join(e.dir, fmt.Sprintf("%s-%d", name, e.n))
}

func (e *env) machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), TempDir: e.dir}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPU = strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
				break
			}
		}
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		f := strings.Fields(string(out))
		for _, w := range f {
			if strings.HasPrefix(w, "v=") {
				m.Redis = "redis " + w[2:]
			}
		}
	}
	return m
}

// --- stores -----------------------------------------------------------

// boltURL is a fresh bbolt store URL in the temp dir.
func (e *env) boltURL() string { return "bbolt://" + e.fresh("store") + ".db" }

// redisURL is a fresh key prefix on the given server.
func (e *env) redisURL(kind string) (string, error) {
	s, err := e.redis(kind)
	if err != nil {
		return "", err
	}
	e.n++
	return fmt.Sprintf("redis://%s/0?prefix=b%d", s.addr, e.n), nil
}

// storeURL is a fresh store of kind "bbolt" or "Redis" (a key prefix on
// the appendfsync everysec server).
func (e *env) storeURL(kind string) (string, error) {
	if kind == "Redis" {
		return e.redisURL("everysec")
	}
	return e.boltURL(), nil
}

func openStore(ctx context.Context, raw string) (backend.Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "bbolt" {
		return boltstore.Opener(ctx, u, backend.Options{})
	}
	return redisstore.Opener(ctx, u, backend.Options{})
}

func service(st backend.Store) *admission.Service { return &admission.Service{Store: st} }

// --- redis-server -------------------------------------------------------

type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

func (e *env) redis(kind string) (*redisServer, error) {
	if s := e.servers[kind]; s != nil {
		return s, nil
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := e.fresh("redis-" + kind)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--appendonly", "yes", "--appendfsync", kind, "--daemonize", "no", "--logfile", filepath.Join(dir, "log")}
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr})
	defer c.Close()
	for i := 0; ; i++ {
		if c.Ping(context.Background()).Err() == nil {
			break
		}
		if i > 100 {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer", s.addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.servers[kind] = s
	return s, nil
}

func (s *redisServer) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// cpu is the user and system time the server has used (INFO cpu).
func (s *redisServer) cpu() (time.Duration, error) {
	c := s.client()
	defer c.Close()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_user" || name == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: %s: %w", line, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// cpuOf runs f and returns the CPU time the server and this process used
// meanwhile.
func (s *redisServer) cpuOf(f func() error) (server, self time.Duration, err error) {
	s0, err := s.cpu()
	if err != nil {
		return 0, 0, err
	}
	p0 := selfCPU()
	if err := f(); err != nil {
		return 0, 0, err
	}
	p1 := selfCPU()
	s1, err := s.cpu()
	if err != nil {
		return 0, 0, err
	}
	return s1 - s0, p1 - p0, nil
}

func (s *redisServer) client() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: s.addr, PoolSize: 32})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// --- processes ----------------------------------------------------------

// run is one finished process: its wall time, CPU time and peak RSS.
type run struct {
	wall   time.Duration
	cpu    time.Duration // user and system time of the process and of the children it waited for
	maxRSS int64         // bytes
	out    []byte
}

// hq runs the hermesq binary on store with stdin, and fails unless it
// exits 0.
func (e *env) hq(store string, stdin []byte, args ...string) (run, error) {
	return e.hqEnv(store, nil, stdin, args...)
}

// hqEnv is hq with more environment variables.
func (e *env) hqEnv(store string, extra []string, stdin []byte, args ...string) (run, error) {
	cmd := exec.Command(e.hermesq, args...)
	cmd.Env = append(os.Environ(), "HERMESQ_STORE="+store, "XDG_CONFIG_HOME="+filepath.Join(e.dir, "config"))
	cmd.Env = append(cmd.Env, extra...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return run{}, err
	}
	// The peak RSS is the process's own high-water mark (VmHWM), read
	// while it runs: the rusage of a child started with vfork also counts
	// the parent's memory at the fork.
	var hwm atomic.Int64
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		path := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			if kb := vmHWM(path); kb > 0 {
				hwm.Store(kb * 1024)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	<-polled
	r := run{wall: time.Since(t0), out: out.Bytes(), maxRSS: hwm.Load()}
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		return r, fmt.Errorf("hermesq %s: %v: %s", strings.Join(args, " "), err, firstLines(errb.String()))
	}
	return r, nil
}

// vmHWM reads the peak resident set (kB) from a /proc/PID/status file; 0
// when it cannot.
func vmHWM(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func firstLines(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var out []string
	for sc.Scan() && len(out) < 3 {
		out = append(out, sc.Text())
	}
	return strings.Join(out, " | ")
}

// execStat is the median wall time of a program's runs and the median
// number of minor page faults of one run (0 where the system does not
// report them).
type execStat struct {
	wall   time.Duration
	faults int64
}

// execProg is a program execRounds runs: its argv and the exit codes
// other than 0 it accepts.
type execProg struct {
	argv   []string
	okExit []int
}

// execRounds runs each program once a round for n rounds, the programs
// taking turns, and returns each one's medians.
func execRounds(n int, env []string, progs []execProg) ([]execStat, error) {
	ds := make([][]time.Duration, len(progs))
	fs := make([][]int64, len(progs))
	for i := 0; i < n; i++ {
		for j, p := range progs {
			cmd := exec.Command(p.argv[0], p.argv[1:]...)
			cmd.Env = env
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if err != nil && !slices.Contains(p.okExit, cmd.ProcessState.ExitCode()) {
				return nil, fmt.Errorf("%s: %w", strings.Join(p.argv, " "), err)
			}
			ds[j] = append(ds[j], d)
			fs[j] = append(fs[j], minorFaults(cmd.ProcessState))
		}
	}
	st := make([]execStat, len(progs))
	for j := range progs {
		st[j] = execStat{wall: median(ds[j]), faults: median(fs[j])}
	}
	return st, nil
}

// median sorts xs and returns its middle element.
func median[T cmp.Ordered](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func perSec(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
