package bbolt

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestSessionRecEncoding: a stored session keeps its durable fields (the
// inlined SessionRecord) and the lease and counters side by side, under the
// keys files already hold. A MarshalJSON on backend.SessionRecord would be
// promoted and drop the lease and counters: this test fails then.
func TestSessionRecEncoding(t *testing.T) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := sessionRec{
		SessionRecord: backend.SessionRecord{ID: "s1", Owner: "alice", Grants: []backend.Grant{{Principal: "bob", Role: backend.RoleWriter, Producers: []string{"watch"}}}, CurrentTranscript: "s1.2",
			Epoch: 3, Generation: 4, NextSeq: 5, CreatedAt: at},
		LeaseHolder: "d1", LeaseExpiresAt: at, Queued: 1, Running: 2, Unknown: 3,
	}
	b, err := encode(&rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"s1","owner":"alice","grants":[{"principal":"bob","role":"writer","producers":["watch"]}],"current_transcript":"s1.2","epoch":3,"generation":4,` +
		`"next_seq":5,"created_at":"2031-01-02T03:04:05Z","lease_holder":"d1","lease_expires_at":"2031-01-02T03:04:05Z",` +
		`"queued":1,"running":2,"unknown":3}`
	if string(b) != want {
		t.Fatalf("stored session\n got %s\nwant %s", b, want)
	}
	var back sessionRec
	if err := decode("session", []byte(want), &back); err != nil {
		t.Fatal(err)
	}
	if back.Owner != "alice" || back.LeaseHolder != "d1" || back.Unknown != 3 || len(back.Grants) != 1 ||
		back.Grants[0].Role != backend.RoleWriter || strings.Join(back.Grants[0].Producers, ",") != "watch" {
		t.Fatalf("decoded %+v", back)
	}
	// A file written before grants had roles holds bare principal names:
	// each reads as a writer.
	old := strings.Replace(want, `{"principal":"bob","role":"writer","producers":["watch"]}`, `"bob"`, 1)
	back = sessionRec{}
	if err := decode("session", []byte(old), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Grants) != 1 || back.Grants[0].Principal != "bob" || back.Grants[0].Role != backend.RoleWriter || back.Grants[0].Producers != nil {
		t.Fatalf("decoded old grants %+v", back.Grants)
	}
}

// TestPoisonedHandleNotReused: after an operation panicked on the open
// handle (a corrupt page), a new operation does not get that handle; it
// waits for it to close and opens the file again.
func TestPoisonedHandleNotReused(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hermesq.db"), backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.hold = time.Hour // the handle would otherwise be shared for an hour
	db1, err := s.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = s.view(ctx, func(*txn) error { panic("corrupt page") })
	if !errors.Is(err, backend.ErrInternal) {
		t.Fatalf("a panicking read: %v, want ErrInternal", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if db, err := s.acquire(cancelled); err == nil {
		s.release(false)
		t.Fatalf("the poisoned handle was handed out again (same handle: %v)", db == db1)
	}
	s.release(false) // the last user of the poisoned handle: it closes
	db2, err := s.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(false)
	if db2 == db1 {
		t.Fatal("the file was not opened afresh")
	}
}
