package bbolt

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/hermesq/hermesq/pkg/backend"
)

// FuzzAdmRecJSON: an admission record is written exactly as an
// encoding/json Encoder without HTML escaping writes it, whatever its
// strings (invalid UTF-8, escapes, U+2028, <>&), numbers and times
// (any instant, any zone offset); what encoding/json refuses to write is
// refused as ErrInternal. FuzzRecordCodec reaches only records that
// decode; this reaches the ones the API hands the store.
func FuzzAdmRecJSON(f *testing.F) {
	f.Add("a", "s1", "automation", "watch", "alice", "", "completion:x", "y<z>", `{"text":"a&b"}`, "queued", "", uint64(1), uint64(0), uint64(0), int64(1), int32(0), int64(0), int32(0))
	f.Add("a\u2028", "s\xff", "human", "", "", "r\n", "", "", "\"\\\x01\x7f", "running", "boom\u2029", uint64(1<<63), uint64(3), uint64(4), int64(-1<<63), int32(3600), int64(253402300800), int32(-86400))
	f.Add("", "", "", "", "", "", "", "", "", "", "", uint64(0), uint64(0), uint64(0), int64(0), int32(86399), int64(-62167219201), int32(-89999))
	f.Add("x", "s", "automation", "p", "q", "", "i", "j", "\"\xff\u2028<\"", "queued", "", uint64(2), uint64(1), uint64(0), int64(5), int32(-3600), int64(5), int32(0))
	f.Fuzz(func(t *testing.T, id, session, kind, producer, principal, requestID, ident1, ident2, payload, status, errText string,
		seq, epoch, generation uint64, at int64, atOffset int32, started int64, startedOffset int32) {
		var idents []string
		for _, s := range []string{ident1, ident2} {
			if s != "" {
				idents = append(idents, s)
			}
		}
		r := &admRec{
			ID: id, Session: session, Seq: seq, Kind: kind, Producer: producer, Principal: principal,
			RequestID: requestID, Identities: idents, Payload: payload, PinnedTarget: ident2, DeliveredTo: requestID,
			Status: status, Outcome: errText, Mode: kind, Epoch: epoch, Generation: generation,
			AdmittedAt: time.Unix(0, at).In(time.FixedZone("", int(atOffset))),
			StartedAt:  time.Unix(started, 0).In(time.FixedZone("z", int(startedOffset))),
			ReplayOf:   principal, Error: errText, PayloadSHA1: producer,
		}
		encodesAsEncoder(t, r)
	})
}

// BenchmarkAdmRecEncode: an automation admission's record written by
// appendJSON (what encode does) against segmentio's reflecting encoder,
// which wrote it before.
func BenchmarkAdmRecEncode(b *testing.B) {
	now := time.Now().UTC()
	r := &admRec{ID: "01JZ0000000000000000000000", Session: "b", Seq: 12345, Kind: "automation", Producer: "bench",
		Principal: "alice", Identities: []string{"completion:b:12345"}, Payload: `{"text":"[finished] make test (exit 0)"}`,
		PinnedTarget: "b", Status: "queued", AdmittedAt: now}
	b.Run("appendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encode(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("segmentio", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := fastjson.Append(nil, r, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzSessionRecJSON: a session record is written exactly as an
// encoding/json Encoder without HTML escaping writes it, whatever its
// strings, grants, counts and times; what encoding/json refuses to write
// (a time outside years 0-9999) is refused as ErrInternal.
func FuzzSessionRecJSON(f *testing.F) {
	f.Add("s1", "alice", "bob", "writer", "watch", "s1", "d1", "p", uint8(1), uint64(1), uint64(2), uint64(3), int64(1), int32(0), int64(0), int32(0), 1, 2, 3)
	f.Add("s\xff\u2028", "<a&b>", "", "", "", "\"\\\x01", "", "", uint8(3), uint64(1<<63), uint64(0), uint64(0), int64(-1<<63), int32(3600), int64(253402300800), int32(-86400), -1, 0, 1<<40)
	f.Add("", "", "", "", "", "", "", "", uint8(0), uint64(0), uint64(0), uint64(0), int64(0), int32(86399), int64(-62167219201), int32(-89999), 0, 0, 0)
	f.Fuzz(func(t *testing.T, id, owner, principal, role, producer, current, holder, leasePrincipal string, grants uint8,
		epoch, generation, next uint64, created int64, createdOffset int32, expires int64, expiresOffset int32, queued, running, unknown int) {
		r := &sessionRec{
			SessionRecord: backend.SessionRecord{ID: id, Owner: owner, CurrentTranscript: current, Epoch: epoch, Generation: generation, NextSeq: next,
				CreatedAt: time.Unix(0, created).In(time.FixedZone("", int(createdOffset)))},
			LeaseHolder: holder, LeasePrincipal: leasePrincipal, Queued: queued, Running: running, Unknown: unknown,
			LeaseExpiresAt: time.Unix(expires, 0).In(time.FixedZone("z", int(expiresOffset))),
		}
		switch grants % 4 { // nil, empty, one, two with producers
		case 1:
			r.Grants = []backend.Grant{}
		case 2:
			r.Grants = []backend.Grant{{Principal: principal, Role: backend.GrantRole(role)}}
		case 3:
			r.Grants = []backend.Grant{{Principal: principal, Role: backend.GrantRole(role), Producers: []string{producer, role}}, {Principal: producer}}
		}
		encodesAsEncoder(t, r)
	})
}

// BenchmarkRecordDecode: a session and an admission record read by
// decode (decodeRecord) against the JSON decoder, which read them before.
func BenchmarkRecordDecode(b *testing.B) {
	now := time.Now()
	recs := map[string]any{
		"session": &sessionRec{SessionRecord: backend.SessionRecord{ID: "b", Owner: "alice", CurrentTranscript: "b", NextSeq: 12346, CreatedAt: now},
			LeaseExpiresAt: now, Queued: 3},
		"admission": &admRec{ID: "01JZ0000000000000000000000", Session: "b", Seq: 12345, Kind: "automation", Producer: "bench",
			Principal: "alice", Identities: []string{"completion:b:12345"}, Payload: `{"text":"[finished] make test (exit 0)"}`,
			PinnedTarget: "b", Status: "queued", AdmittedAt: now},
	}
	for name, v := range recs {
		data, err := encode(v)
		if err != nil {
			b.Fatal(err)
		}
		fresh := func() any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }
		b.Run(name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := decode(name, data, fresh()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/jsonv2", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := jsonv2.Unmarshal(data, fresh(), v1Options); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// encodesAsEncoder fails t unless encode writes r exactly as an
// encoding/json Encoder without HTML escaping does, or refuses it as
// ErrInternal where that Encoder refuses it.
func encodesAsEncoder(t *testing.T, r any) {
	t.Helper()
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	stdErr := enc.Encode(r)
	got, err := encode(r)
	if stdErr != nil {
		if err == nil || !errors.Is(err, backend.ErrInternal) {
			t.Fatalf("encoding/json refuses %#v (%v); ours gives %q, %v", r, stdErr, got, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("encoding/json writes %s; ours refuses: %v", want.Bytes(), err)
	}
	if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got, w) {
		t.Fatalf("encodes unlike encoding/json:\nours %s\nstd  %s", got, w)
	}
}
