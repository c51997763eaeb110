package redis_test

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
)

// On one server an admission is one script call: the global lookups (the
// admission id's, the identities') are written by the admit script, not
// by commands sent before it, and are there after it.
func TestAdmitOneScriptOnOneServer(t *testing.T) {
	srv := redistest.Start(t)
	const prefix = "onestep"
	s := mustOpen(t, srv.URLWithPrefix(prefix))
	ctx := context.Background()
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"CONFIG", "SET", "slowlog-log-slower-than", "0"}, {"SLOWLOG", "RESET"}} {
		if _, err := srv.Do(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "s1", Kind: backend.KindAutomation, Producer: "p",
		Principal: "alice", Identities: []string{"done:1"}, Payload: []byte(`{"text":"x"}`)}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("admit: %v, %+v", err, res)
	}
	// The server logs every command; those a script runs come from its
	// own client, not from a connection of the store.
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	log, err := c.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, e := range log {
		if !strings.HasPrefix(e.ClientAddr, "127.0.0.1:") || len(e.Args) == 0 {
			continue
		}
		switch cmd := strings.ToLower(e.Args[0]); cmd {
		case "slowlog", "hello", "eval": // the log read, a connection's set-up, the script's first load
		default:
			sent = append(sent, cmd)
		}
	}
	if len(sent) != 1 || sent[0] != "evalsha" {
		t.Errorf("one admission sent %v, want one script call", sent)
	}
	owner, err := srv.Do("GET", prefix+":admission:{"+res[0].Admission.ID+"}")
	if err != nil || !strings.HasPrefix(owner, "s1 ") {
		t.Errorf("admission id lookup %q, %v; want s1 and a time", owner, err)
	}
	if n, err := srv.Do("SISMEMBER", prefix+":identity:{done:1}", "s1"); err != nil || n != "1" {
		t.Errorf("identity lookup: %q, %v; want s1 in it", n, err)
	}
}
