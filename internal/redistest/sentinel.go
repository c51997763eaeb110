package redistest

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Sentinel is one redis-server in Sentinel mode monitoring a Server as
// master "mymaster".
type Sentinel struct {
	master *Server
	node   *clusterNode
}

// MasterName is the name Sentinels started by StartSentinel monitor.
const MasterName = "mymaster"

// StartSentinel starts a Sentinel monitoring s (which must have no ACL or
// TLS) and waits until it knows the master's address.
func (s *Server) StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort(false)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		n := &clusterNode{dir: t.TempDir(), port: port}
		conf := strings.Join([]string{
			"bind 127.0.0.1",
			"port " + strconv.Itoa(port),
			"daemonize no",
			"dir " + n.dir,
			"logfile " + filepath.Join(n.dir, "sentinel.log"),
			"sentinel monitor " + MasterName + " 127.0.0.1 " + strconv.Itoa(s.port) + " 1",
			"sentinel down-after-milliseconds " + MasterName + " 5000",
		}, "\n") + "\n"
		path := filepath.Join(n.dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd, exited, err := spawn(n.dir, "redis-server", path, "--sentinel")
		if err != nil {
			t.Fatalf("redistest: start sentinel: %v", err)
		}
		ready := func() error {
			out, err := Command(n.addr(), "", "", nil, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
			if err == nil && !strings.Contains(out, strconv.Itoa(s.port)) {
				err = errNotYet
			}
			return err
		}
		if err := waitReady(exited, ready); err != nil {
			_ = cmd.Process.Kill()
			<-exited
			continue
		}
		n.cmd, n.exited = cmd, exited
		t.Cleanup(n.kill)
		return &Sentinel{master: s, node: n}
	}
	t.Fatal("redistest: sentinel did not start")
	return nil
}

type notYet struct{}

func (notYet) Error() string { return "not ready yet" }

var errNotYet error = notYet{}

// Addr is the Sentinel's host:port.
func (se *Sentinel) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(se.node.port)) }

// FreshURL is a store URL reaching the master through this Sentinel, with
// a new unique prefix: redis://SENTINEL/0?sentinel=mymaster&prefix=….
func (se *Sentinel) FreshURL() string {
	q := url.Values{}
	q.Set("sentinel", MasterName)
	q.Set("prefix", UniquePrefix())
	return "redis://" + se.Addr() + "/0?" + q.Encode()
}
