package backend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzAdmissionJSON holds Admission.MarshalJSON, appended by hand, to the
// bytes json.Marshal writes for the admission's shape: the same bytes, or
// both refusing (a time outside years 0-9999, a payload that is not JSON).
func FuzzAdmissionJSON(f *testing.F) {
	f.Add("01a23fd34521bc333fc23e252b38cea2", "s1", "human", "queued", "", "alice", "req-1", "", "", []byte(`{"text":"hi"}`),
		uint64(1), uint64(0), int64(1764806400), int64(123456789), 0, false)
	f.Add("id", "s<1>&", "automation", "done", "watch", "bob", "", "completion:a", "ci:\u2028b\xff", []byte(` { "text" : "a<b>&c\u2029" , "n":[1, 2.50e3] } `),
		uint64(1<<63), uint64(7), int64(-62135596800), int64(0), 3600, true)
	f.Add("\x00\x1f\"\\\b\f\n\r\t\x7f", "é", "", "", "", "", "", "", "", []byte(`not json`),
		uint64(0), uint64(0), int64(253402300799), int64(999999999), -60, false)
	f.Add("x", "y", "human", "running", "", "", "", "", "", []byte(``),
		uint64(2), uint64(3), int64(253402300800), int64(0), 0, false)
	f.Fuzz(func(t *testing.T, id, session, kind, status, producer, principal, requestID, ident1, ident2 string, payload []byte,
		seq, epoch uint64, sec, nsec int64, offset int, compacted bool) {
		at := time.Unix(sec, nsec).In(time.FixedZone("z", offset%(26*3600)))
		a := Admission{
			ID: id, Session: session, Seq: seq, Kind: Kind(kind), Producer: producer, Principal: principal,
			RequestID: requestID, Payload: payload, PinnedTarget: ident2, DeliveredTo: session,
			Status: Status(status), Outcome: Outcome(ident1), Mode: Mode(requestID), Epoch: epoch, Generation: seq ^ epoch,
			AdmittedAt: at, StartedAt: at.Add(time.Duration(nsec)), ReplayOf: principal, Error: producer,
			Compacted: compacted,
		}
		if ident1 != "" {
			a.Identities = append(a.Identities, ident1)
		}
		if ident2 != "" {
			a.Identities = append(a.Identities, ident2)
		}
		want, wantErr := a.marshalSlow()
		fast, ok := a.appendJSON(nil)
		if !ok {
			if wantErr == nil {
				t.Fatalf("the hand encoder gave up where json.Marshal writes\n%s", want)
			}
		} else if wantErr != nil || !bytes.Equal(fast, want) {
			t.Fatalf("hand encoder:\n%s\njson.Marshal (err %v):\n%s", fast, wantErr, want)
		}
		got, err := a.MarshalJSON()
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("MarshalJSON: %s (err %v)\njson.Marshal: %s (err %v)", got, err, want, wantErr)
		}
	})
}

// FuzzStrictObject holds StrictObject's members, collected while the line
// is checked, to what json.Unmarshal into a map[string]json.RawMessage
// gives for any input CheckJSON accepts; both refuse what is not an object.
func FuzzStrictObject(f *testing.F) {
	for _, s := range []string{
		`{"session":"s1","text":"hi"}`,
		` { "text" : "a\u00e9\ud83d\ude00" , "n" : [1, 2.5e3, {"x":null}] , "o":{} } `,
		`{"\u0074ext":"escaped key","b":true,"c":false,"d":-0.5}`,
		`{}`, `null`, `[1]`, `"s"`, `{"a":1,"a":2}`, `{"a":1} x`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := StrictObject(b, "line")
		if CheckJSON(b) != nil {
			if err == nil {
				t.Fatalf("StrictObject(%q) accepted what CheckJSON refuses", b)
			}
			return
		}
		var want map[string]json.RawMessage
		if json.Unmarshal(b, &want) != nil || want == nil {
			if err == nil {
				t.Fatalf("StrictObject(%q) = %v, want a refusal (not an object)", b, got)
			}
			return
		}
		if err != nil && len(want) == 0 {
			t.Fatalf("StrictObject(%q): %v", b, err)
		}
		if err != nil {
			// Only CheckFields refuses now: no field is allowed.
			if !strings.Contains(err.Error(), "unknown field") {
				t.Fatalf("StrictObject(%q): %v", b, err)
			}
			got, _ = checkJSON(b, true)
		}
		if len(got) != len(want) {
			t.Fatalf("StrictObject(%q): %d members, json.Unmarshal %d", b, len(got), len(want))
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
				t.Fatalf("StrictObject(%q): member %q = %q (%v), json.Unmarshal %q", b, k, g, ok, v)
			}
		}
	})
}

// TestStrictObjectOwnsItsMembers: the members stay as they were when the
// caller reuses its buffer.
func TestStrictObjectOwnsItsMembers(t *testing.T) {
	b := []byte(`{"text":"first"}`)
	m, err := StrictObject(b, "line", "text")
	if err != nil {
		t.Fatal(err)
	}
	copy(b, `{"text":"other"}`)
	if string(m["text"]) != `"first"` {
		t.Fatalf("member changed with the caller's buffer: %s", m["text"])
	}
}

// FuzzAppendQuoted holds appendQuoted, which checks 8 bytes at once where
// it can, to the writers it stands for: json.Marshal (quoteMarshal), an
// encoding/json Encoder without HTML escaping (quoteNoHTML), and in
// quoteCanonical to quoting byte by byte with only the escapes JSON
// requires, the rest copied as it is. Each input is also quoted after 1
// to 7 bytes of padding, so every byte meets every place in a word.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "plain ascii text, long enough for words", "a\"b\\c\x00\x1f\x7f", "<>&\u2028\u2029",
		"\xff\xfe é 日本 \xe2\x80", "0123456\"89abcde\\ghijklm<opqrstu\x01", "\u2028\u2028\u2028\xe2\x80\xa9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for pad := 0; pad < 8; pad++ {
			in := strings.Repeat("p", pad) + s
			marshal, _ := json.Marshal(in)
			var enc bytes.Buffer
			e := json.NewEncoder(&enc)
			e.SetEscapeHTML(false)
			_ = e.Encode(in)
			for _, c := range []struct {
				mode quoteMode
				want []byte
			}{
				{quoteMarshal, marshal},
				{quoteNoHTML, bytes.TrimSuffix(enc.Bytes(), []byte("\n"))},
				{quoteCanonical, canonicalQuoted(in)},
			} {
				if got := appendQuoted([]byte("x"), in, c.mode); !bytes.Equal(got[1:], c.want) || got[0] != 'x' {
					t.Fatalf("mode %d, %q:\ngot  %s\nwant %s", c.mode, in, got, c.want)
				}
			}
		}
	})
}

// canonicalQuoted is quoteCanonical written byte by byte.
func canonicalQuoted(s string) []byte {
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c < 0x20:
			b = append(b, fmt.Sprintf(`\u%04x`, c)...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
