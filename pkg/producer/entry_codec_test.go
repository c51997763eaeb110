package producer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzEntryCodec holds the outbox's entry codec to encoding/json, which
// wrote outboxes before it: the same bytes are accepted and refused, decode
// to the same entry (times in the same location) and are written back as
// the same bytes (json.Marshal's, HTML escaped), and what is written reads
// back as the same entry.
func FuzzEntryCodec(f *testing.F) {
	for _, s := range []string{
		`{"session":"s1","target":"s1","identity":"[\"async_delegation\",\"d1\",\"\"]","text":"[delegation d1] done","seq":7,"state":"pending","claim":"c0ffee","claimed_at":"2031-01-02T03:04:05.123456789Z","attempts":2,"added_at":"2031-01-02T03:04:05Z"}`,
		`{"session":"s","target":"","identity":"i","payload":{"text":"a<b>&\u2028","z":[1e21,-0,null]},"seq":1,"state":"delivered","attempts":1,"added_at":"2031-01-02T03:04:05+02:00","settled_at":"2031-01-02T03:04:06Z"}`,
		`{"session":"s","identity":"i","state":"pending","reason":"session s: not found","refused_at":"2031-01-02T03:04:05Z","not_before":"2031-01-02T03:05:05Z","added_at":"0000-01-01T00:00:00+01:00"}`,
		`{"Session":"x","session":"y","SEQ":3,"seq":"4"}`, `{"seq":-1}`, `{"seq":18446744073709551616}`, `{"attempts":1.5}`,
		`{"payload":"text"}`, `{"payload":{"text":1}`, `{"text":"\xff\xfe\ud800"}`, `{"added_at":"9999-12-31T23:30:00-01:00"}`,
		`{"claimed_at":null,"payload":null}`, `null`, `[]`, ` {"state" : "pending" } `, `{"state":"pending"}x`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var std Entry
		stdErr := json.Unmarshal(data, &std)
		e, err := decodeEntry(data)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: decode error %v, encoding/json's %v", data, err, stdErr)
		}
		if err != nil {
			return
		}
		if d := cmp.Diff(&std, e); d != "" {
			t.Fatalf("%q decodes unlike encoding/json (-std +ours):\n%s", data, d)
		}
		if x, y := fmt.Sprintf("%#v", *e), fmt.Sprintf("%#v", std); x != y {
			t.Fatalf("%q decodes unlike encoding/json:\nours %s\nstd  %s", data, x, y)
		}
		ours, err := encodeEntry(e)
		want, wantErr := json.Marshal(e)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(ours, want) {
			t.Fatalf("%q encodes unlike json.Marshal:\nours %s (%v)\nstd  %s (%v)", data, ours, err, want, wantErr)
		}
		if err != nil {
			return
		}
		back, err := decodeEntry(ours)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", ours, err)
		}
		if again, err := encodeEntry(back); err != nil || !bytes.Equal(again, ours) {
			t.Fatalf("codec not stable:\n%s\n%s (%v)", ours, again, err)
		}
	})
}

// Entries as the outbox writes them are read without the decoder
// (readEntry), to the entry the decoder reads; an entry whose strings the
// encoder escapes (HTML characters in its text) goes to the decoder.
func TestEntriesReadWithoutDecoder(t *testing.T) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 123456789, time.UTC)
	for i, e := range []Entry{
		{Event: Event{Session: "s1", Target: "s1", Identity: `["async_delegation","d1",""]`, Text: "[delegation d1] done\n"},
			Seq: 7, State: StatePending, Claim: "c0ffee", ClaimedAt: at, Attempts: 2, AddedAt: at},
		{Event: Event{Session: "s", Identity: "i", Payload: json.RawMessage(`{"text":"a<b>&\u2028 é","z":[1e21,-0,null,true,{"k":"\"\\"}]}`)},
			Seq: 1, State: StateDelivered, Attempts: 1, AddedAt: at.In(time.FixedZone("", 7200)), SettledAt: at},
		{Event: Event{Session: "s", Identity: "i"}, State: StatePending, Reason: "session s: not found",
			RefusedAt: at, NotBefore: at.Add(time.Minute), AddedAt: at},
	} {
		b, err := encodeEntry(&e)
		if err != nil {
			t.Fatal(err)
		}
		var fast Entry
		if !readEntry(b, &fast) {
			t.Fatalf("entry %d, %s: not read without the decoder", i, b)
		}
		var std Entry
		if err := json.Unmarshal(b, &std); err != nil {
			t.Fatal(err)
		}
		if x, y := fmt.Sprintf("%#v", fast), fmt.Sprintf("%#v", std); x != y {
			t.Fatalf("entry %d reads unlike encoding/json:\nours %s\nstd  %s", i, x, y)
		}
	}
	b, err := encodeEntry(&Entry{Event: Event{Session: "s", Identity: "i", Text: "a<b"}, State: StatePending})
	if err != nil {
		t.Fatal(err)
	}
	if readEntry(b, &Entry{}) {
		t.Fatalf("%s: an escaped text was read without the decoder", b)
	}
	if e, err := decodeEntry(b); err != nil || e.Text != "a<b" {
		t.Fatalf("%s: %+v, %v", b, e, err)
	}
}

// BenchmarkEntryCodec reads and writes an entry of figure 10's delegation
// results, as a poll or settle does for each event:
//
//	go test -run '^$' -bench EntryCodec ./pkg/producer/
func BenchmarkEntryCodec(b *testing.B) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 123456789, time.UTC)
	e := Entry{Event: Event{Session: "s042", Target: "s042", Identity: `["async_delegation","d00042",""]`,
		Text: "[delegation d00042] result 42 of the benchmark"}, Seq: 43, State: StatePending, Claim: "0123456789abcdef0123456789abcdef",
		ClaimedAt: at, Attempts: 1, AddedAt: at}
	enc, err := encodeEntry(&e)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeEntry(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeEntry(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
