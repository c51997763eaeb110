package redis_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
)

// dropProxy forwards TCP to a Redis server. Armed with a marker, it passes
// the first request containing the marker on to the server and then cuts
// the connection before the reply comes back: the script ran, the client
// cannot know.
type dropProxy struct {
	l      net.Listener
	target string
	marker atomic.Value // []byte
	cuts   atomic.Int64
	wg     sync.WaitGroup
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{l: l, target: target}
	p.marker.Store([]byte(nil))
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { _ = l.Close(); p.wg.Wait() })
	return p
}

func (p *dropProxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	var dropping atomic.Bool
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && !dropping.Load() {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			m, _ := p.marker.Load().([]byte)
			cut := len(m) > 0 && bytes.Contains(buf[:n], m)
			if cut {
				p.marker.Store([]byte(nil))
				dropping.Store(true)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
			if cut {
				time.Sleep(200 * time.Millisecond) // the server runs the script
				p.cuts.Add(1)
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = client.Close()
	_ = server.Close()
}

// TestScriptNotResent: when the connection dies after a script was sent, the
// store reports ErrUnavailable and does not send the script again: an admit
// without a request id, whose reply was lost, is committed once, not twice.
func TestScriptNotResent(t *testing.T) {
	srv := redistest.Start(t)
	p := startDropProxy(t, srv.Addr())
	s := mustOpen(t, "redis://"+p.l.Addr().String()+"/0?prefix="+redistest.UniquePrefix())
	ctx := context.Background()
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	admit := func(text string) error {
		res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "s1", Kind: backend.KindHuman, Principal: "alice", Payload: backendtest.Payload(text)}})
		if err == nil {
			err = res[0].Err
		}
		return err
	}
	if err := admit("warm-up"); err != nil { // the script is now cached
		t.Fatal(err)
	}
	p.marker.Store([]byte("cut-here"))
	err := admit("cut-here")
	if p.cuts.Load() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", p.cuts.Load())
	}
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("admit whose reply was lost: %v, want ErrUnavailable", err)
	}
	as, err := s.ListAdmissions(ctx, "s1", backend.AdmissionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range as {
		if a.Text() == "cut-here" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the lost-reply admit committed %d admissions, want exactly 1 (the script ran once and was not re-sent)", n)
	}
	// Settle is not re-sent either: a settle whose reply was lost wrote its
	// messages once. (The first settle caches the script: a NOSCRIPT reply
	// means nothing ran.)
	l, err := s.AcquireLease(ctx, backend.LeaseRequest{Principal: "alice", Session: "s1", Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	settle := func(a backend.Admission, reply string) error {
		c, err := s.Claim(ctx, backend.ClaimRequest{Session: "s1", AdmissionID: a.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Settle(ctx, backend.SettleRequest{Session: "s1", AdmissionID: c.ID, Epoch: c.Epoch, Generation: c.Generation,
			Outcome: backend.OutcomeCompleted, Messages: []backend.NewMessage{
				{Transcript: "s1", Role: backend.RoleUser, Content: a.Text()},
				{Transcript: "s1", Role: backend.RoleAssistant, Content: reply}}})
		return err
	}
	if err := settle(as[0], "fine"); err != nil {
		t.Fatal(err)
	}
	p.marker.Store([]byte("reply-cut"))
	if err := settle(as[1], "reply-cut"); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("settle whose reply was lost: %v, want ErrUnavailable", err)
	}
	if p.cuts.Load() != 2 {
		t.Fatalf("the proxy cut %d connections, want 2", p.cuts.Load())
	}
	ms, err := s.ListMessages(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("%d messages after a lost settle reply, want 4 (each settle's two, written once)", len(ms))
	}
	if a, err := s.GetAdmission(ctx, as[1].ID); err != nil || a.Status != backend.StatusDone {
		t.Fatalf("after a lost settle reply: %+v, %v; want done", a, err)
	}
}
