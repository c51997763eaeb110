package redistest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three masters and no replicas.
type Cluster struct {
	t      testing.TB
	nodes  []*clusterNode
	prefix string
}

type clusterNode struct {
	dir    string
	port   int
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func (n *clusterNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

func (n *clusterNode) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
}

// StartCluster starts three cluster-enabled redis-server processes, joins
// them with `redis-cli --cluster create`, and waits until every node reports
// cluster_state:ok.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	c := &Cluster{t: t, prefix: UniquePrefix()}
	t.Cleanup(c.Stop)
	for i := 0; i < 3; i++ {
		n, err := startClusterNode(t)
		if err != nil {
			t.Fatalf("redistest: start cluster node: %v", err)
		}
		c.nodes = append(c.nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		args = append(args, n.addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(readyTimeout)
	for _, n := range c.nodes {
		for {
			info, err := Command(n.addr(), "", "", nil, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok after %s: %v\n%s", n.addr(), readyTimeout, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

func startClusterNode(t testing.TB) (*clusterNode, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort(true)
		if err != nil {
			return nil, err
		}
		n := &clusterNode{dir: t.TempDir(), port: port}
		conf := strings.Join([]string{
			"bind 127.0.0.1",
			"protected-mode no",
			"port " + strconv.Itoa(port),
			"daemonize no",
			"save \"\"",
			"appendonly no",
			"dir " + n.dir,
			"logfile " + filepath.Join(n.dir, "redis.log"),
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout 5000",
		}, "\n") + "\n"
		path := filepath.Join(n.dir, "redis.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return nil, err
		}
		cmd, exited, err := spawn(n.dir, "redis-server", path)
		if err != nil {
			return nil, err
		}
		if lastErr = waitReady(exited, func() error { return Ping(n.addr(), "", "", nil) }); lastErr != nil {
			_ = cmd.Process.Kill()
			<-exited
			lastErr = fmt.Errorf("%w\n%s", lastErr, tail(filepath.Join(n.dir, "redis.log")))
			continue
		}
		n.cmd, n.exited = cmd, exited
		return n, nil
	}
	return nil, lastErr
}

// Addrs are host:port of the three masters.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr()
	}
	return out
}

// URL is the cluster form of the store URL with the cluster's unique
// prefix: redis://h1:p1,h2:p2,h3:p3/0?prefix=….
func (c *Cluster) URL() string { return c.URLWithPrefix(c.prefix) }

// FreshURL returns a URL with a new unique prefix (an empty store).
func (c *Cluster) FreshURL() string { return c.URLWithPrefix(UniquePrefix()) }

// URLWithPrefix returns the cluster URL with the given key prefix.
func (c *Cluster) URLWithPrefix(prefix string) string {
	q := url.Values{}
	q.Set("prefix", prefix)
	return "redis://" + strings.Join(c.Addrs(), ",") + "/0?" + q.Encode()
}

// Do runs one command on the node at index i.
func (c *Cluster) Do(i int, args ...string) (string, error) {
	return Command(c.nodes[i].addr(), "", "", nil, args...)
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.kill()
	}
}

// KillNode kills master i with SIGKILL (its slots become unreachable).
func (c *Cluster) KillNode(i int) { c.nodes[i].kill() }
