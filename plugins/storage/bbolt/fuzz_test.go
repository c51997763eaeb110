package bbolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hermesq/hermesq/pkg/backend"
)

// FuzzRecordCodec: the record codec never panics on any stored bytes; a
// value it decodes encodes and decodes again to the same bytes (the codec
// is stable), and what it refuses is ErrInternal (a corrupt store). It
// agrees with encoding/json, which wrote the stores before it: the same
// bytes are accepted and refused, decode to the same value and are
// written back as the same bytes.
func FuzzRecordCodec(f *testing.F) {
	for _, s := range []string{
		`{"id":"s1","owner":"alice","grants":[{"principal":"bob","role":"writer","producers":["watch"]}],"current_transcript":"s1","epoch":3,"generation":4,"next_seq":5,"created_at":"2031-01-02T03:04:05Z","lease_holder":"d1","lease_expires_at":"2031-01-02T03:04:05Z","queued":1,"running":2,"unknown":3}`,
		`{"id":"s1","owner":"alice","grants":["bob"]}`,
		// As the store writes them (decodeRecord's path), and near misses
		// that go to the JSON decoder.
		`{"id":"s1","owner":"alice","grants":null,"current_transcript":"s1","epoch":0,"generation":0,"next_seq":1,"created_at":"2031-01-02T03:04:05.123456789Z","lease_expires_at":"0001-01-01T00:00:00Z","queued":0,"running":0,"unknown":0}`,
		`{"id":"s1","owner":"alice","grants":[],"queued":-1}`, `{"grants":[{}],"epoch":01}`, `{"grants":[{"principal":"a","producers":[]},{"role":"reader"}]}`,
		`{"id":"t1","session":"s1","parent":null,"child":"t2","ended_at":null,"end_reason":null,"message_count":3,"note_count":1,"created_at":"2031-01-02T03:04:05+02:00"}`,
		`{"id":"t1","ended_at":"2031-01-02T03:04:05Z","end_reason":"tui_close","parent":"","id":"t2"}`, `{"message_count":null}`,
		`{"id":"a","session":"s1","seq":18446744073709551615,"kind":"automation","identities":[],"payload":"{\"text\":\"a\\nb\\t\/\"}","status":"queued","admitted_at":"2031-01-02T03:04:05Z","started_at":"0001-01-01T00:00:00Z","settled_at":"0001-01-01T00:00:00Z"}`,
		`{"id":"a","identities":["x","y"],"payload":"\u0041","error":"\b\f\r"}`, `{"id":"a","Id":"b"}`, "{\"id\":\"\xe2\x80\xa8\xed\xa0\x80\"}", `{}`, `{"id":"a",}`, `{"seq":0}`, `{"seq":00}`,
		`{"id":"a","session":"s1","seq":1,"kind":"human","principal":"p","payload":"{\"text\":\"x\"}","status":"queued"}`,
		`{"ID":"t","Session":"s1","MessageCount":2}`,
		`{"grants":[1,{"role":7}]}`,
		`null`, `[]`, `{"seq":-1}`, "\xff",
		// Escapes, characters and numbers the encoder must write as
		// encoding/json does, or refuse to read.
		"{\"id\":\"a\u2028b\u2029<>&\\u2028\",\"payload\":\"\xff\xfe\\ud800\",\"error\":\"\\t\\u0001\x7f\"}",
		`{"ID":"x","id":"y","Seq":2,"seq":3,"SEQ":4}`, `{"seq":1e3}`, `{"seq":18446744073709551616}`, `{"seq":1.0}`,
		`{"admitted_at":"2031-01-02T03:04:05.123456789+02:00","started_at":"0001-01-01T00:00:00Z","settled_at":null}`,
		`{"identities":null,"grants":{},"payload":{}}`,
		`{"admitted_at":"0000-01-01T00:00:00+01:00"}`, `{"created_at":"9999-12-31T23:30:00-01:00"}`,
		`{"lease_expires_at":"0000-01-01T00:00:00+01:00","ended_at":"0000-01-01T00:00:00+01:00","CreatedAt":"0000-01-01T00:00:00+01:00"}`,
		`{"transcript":"t<1>","seq":2,"role":"note","content":"a&b\u2028","admission_id":null,"created_at":"2031-01-02T03:04:05.5+01:00","metadata":{"z":[1.5e300,-0,"<"],"a":{"y":1,"b":null},"m":1e21}}`, `{"epoch":"1"}`, ` {"id" : "a" } `, `{"id":"a"}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(what string, fresh func() any) {
			v, std := fresh(), fresh()
			stdErr := json.Unmarshal(data, std)
			if err := decode(what, data, v); err != nil {
				if !errors.Is(err, backend.ErrInternal) {
					t.Fatalf("%s: decode error %v is not ErrInternal", what, err)
				}
				if stdErr == nil {
					t.Fatalf("%s: %q refused (%v), encoding/json accepts it", what, data, err)
				}
				return
			}
			if stdErr != nil {
				t.Fatalf("%s: %q accepted, encoding/json refuses it: %v", what, data, stdErr)
			}
			if d := cmp.Diff(std, v); d != "" {
				t.Fatalf("%s: %q decodes unlike encoding/json (-std +ours):\n%s", what, data, d)
			}
			// cmp compares times with Equal; their locations matter too
			// (they are written back).
			if x, y := fmt.Sprintf("%#v", v), fmt.Sprintf("%#v", std); x != y {
				t.Fatalf("%s: %q decodes unlike encoding/json:\nours %s\nstd  %s", what, data, x, y)
			}
			b1, err := encode(v)
			if err != nil {
				return // a value JSON cannot write back (NaN-free here, but be safe)
			}
			var sb bytes.Buffer
			enc := json.NewEncoder(&sb)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil || !bytes.Equal(bytes.TrimSuffix(sb.Bytes(), []byte("\n")), b1) {
				t.Fatalf("%s: encodes unlike encoding/json:\nours %s\nstd  %s (%v)", what, b1, sb.Bytes(), err)
			}
			w := fresh()
			if err := decode(what, b1, w); err != nil {
				t.Fatalf("%s: re-decoding %q: %v", what, b1, err)
			}
			b2, err := encode(w)
			if err != nil || string(b1) != string(b2) {
				t.Fatalf("%s: codec not stable:\n%s\n%s", what, b1, b2)
			}
		}
		check("session", func() any { return &sessionRec{} })
		check("admission", func() any { return &admRec{} })
		check("transcript", func() any { return &backend.Transcript{} })
		check("message", func() any { return &backend.Message{} })
		// Messages are written by encodeMessage: what json.Marshal
		// (their MarshalJSON) writes, read back the same.
		var m backend.Message
		if decode("message", data, &m) == nil {
			ours, err := encodeMessage(&m)
			std, serr := json.Marshal(m)
			if (err == nil) != (serr == nil) || !bytes.Equal(ours, std) {
				t.Fatalf("message: encodes unlike json.Marshal:\nours %s (%v)\nstd  %s (%v)", ours, err, std, serr)
			}
			var back backend.Message
			if err == nil {
				if err := decode("message", ours, &back); err != nil {
					t.Fatalf("message: re-decoding %q: %v", ours, err)
				}
				if again, _ := encodeMessage(&back); !bytes.Equal(again, ours) {
					t.Fatalf("message: codec not stable:\n%s\n%s", ours, again)
				}
			}
		}
		check("admins", func() any { return &[]string{} })
	})
}

// The records the store writes are read without the JSON decoder
// (decodeRecord), whatever their strings hold; FuzzRecordCodec holds that
// path to encoding/json.
func TestRecordsReadWithoutDecoder(t *testing.T) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	recs := []any{
		&sessionRec{SessionRecord: backend.SessionRecord{ID: "s1", Owner: "alice", CurrentTranscript: "s1", NextSeq: 7, CreatedAt: at}},
		&sessionRec{SessionRecord: backend.SessionRecord{ID: "s\n1", Owner: `a"b\c`, Grants: []backend.Grant{
			{Principal: "bob", Role: backend.RoleWriter}, {Principal: "w", Role: "producer", Producers: []string{"watch", "x/y"}}},
			Epoch: 3, Generation: 4, NextSeq: 5, CreatedAt: at.UTC()}, LeaseHolder: "d1", LeaseExpiresAt: at, LeasePrincipal: "p", Queued: 2, Running: 1},
		&admRec{ID: "a1", Session: "s1", Seq: 9, Kind: "human", Principal: "alice", RequestID: "r1", Payload: `{"text":"line 1\nline 2\t\"quoted\""}`,
			Status: "queued", AdmittedAt: at},
		&admRec{ID: "a2", Session: "s1", Seq: 10, Kind: "automation", Producer: "watch", Identities: []string{"completion:x", "é"},
			Payload: `{"text":"[finished] make (exit 0)"}`, Status: "done", Outcome: "completed", Mode: "note", Epoch: 2, Generation: 3,
			AdmittedAt: at, StartedAt: at, SettledAt: at, ReplayOf: "a0", Error: "boom"},
	}
	for _, v := range recs {
		b, err := encode(v)
		if err != nil {
			t.Fatal(err)
		}
		fresh := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if !decodeRecord(b, fresh) {
			t.Errorf("%s is left to the JSON decoder", b)
		}
	}
	tr := backend.Transcript{ID: "t1", Session: "s1", Parent: "t0", MessageCount: 3, NoteCount: 1, CreatedAt: at}
	b, err := encode(&tr)
	if err != nil {
		t.Fatal(err)
	}
	if !decodeRecord(b, &backend.Transcript{}) {
		t.Errorf("%s is left to the JSON decoder", b)
	}
}
