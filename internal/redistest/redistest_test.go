package redistest

import (
	"strings"
	"testing"
)

func TestStandaloneAOFSurvivesKill(t *testing.T) {
	s := Start(t, WithAOF())
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	before := s.URL()
	s.Kill()
	if err := s.ping(); err == nil {
		t.Fatal("server answers PING after Kill")
	}
	s.Restart()
	got, err := s.Do("GET", "k")
	if err != nil || got != "v" {
		t.Fatalf("after restart GET k = %q, %v; want v (AOF replay)", got, err)
	}
	// The same server (port, prefix) after a restart; FreshURL another prefix.
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") || s.URL() != before || s.URL() == s.FreshURL() {
		t.Fatalf("URL %q (before the restart %q) / FreshURL not as documented", s.URL(), before)
	}
}

func TestACL(t *testing.T) {
	s := Start(t, WithACL("app", "s3cret-pw"))
	if _, err := Command(s.Addr(), "", "", nil, "PING"); err == nil {
		t.Fatal("PING without AUTH succeeded with the default user off")
	}
	if _, err := Command(s.Addr(), "app", "wrong", nil, "PING"); err == nil {
		t.Fatal("AUTH with a wrong password succeeded")
	}
	if _, err := s.Do("PING"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.URL(), "app:s3cret-pw@") {
		t.Fatalf("URL %q lacks the credentials", s.URL())
	}
}

func TestTLS(t *testing.T) {
	s := Start(t, WithTLS())
	if _, err := Command(s.Addr(), "", "", nil, "PING"); err == nil {
		t.Fatal("plain-text PING succeeded on a TLS-only server")
	}
	if _, err := s.Do("PING"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "rediss://") || !strings.Contains(s.URL(), "ca=") {
		t.Fatalf("URL %q", s.URL())
	}
}

func TestCluster(t *testing.T) {
	c := StartCluster(t)
	info, err := c.Do(0, "CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_known_nodes:3") || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("CLUSTER INFO: %v\n%s", err, info)
	}
	if n := strings.Count(c.URL(), ","); n != 2 {
		t.Fatalf("cluster URL %q does not list three hosts", c.URL())
	}
}
