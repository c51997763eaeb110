package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Native fuzz targets for the two readers of untrusted NDJSON: the --batch
// line parser and the import reader. Their seed corpora are committed under
// testdata/fuzz; scripts/test.sh runs each for a bounded time, and any
// crash found is kept there as a corpus entry.

var batchSeeds = []string{
	`{"session":"s1","text":"hello"}`,
	`{"session":"s1","payload":{"text":"x","n":[1,2.5e3,null,true]},"request_id":"r1"}`,
	`{"session":"s1","producer":"ci","identities":["a","b"],"target":"s1","text":"t"}`,
	`{"session":"s1","producer":"d","parts":[{"identity":"A","text":"a"},{"identity":"B","payload":{"text":"b"}}]}`,
	`{"session":"s1","session":"s2","text":"x"}`,
	`{"session":"s1","Text":"x"}`,
	"{\"session\":\"s1\",\"text\":\"caf\xe9\"}",
	"\ufeff{\"session\":\"s1\",\"text\":\"x\"}",
	`{"session":"s1","text":"\ud800"}`,
	`{"session":"s1","te\u0078t":"a","text":"b"}`,
	`{"session":null,"text":null,"payload":null,"identities":null,"parts":null}`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
	`{"session":"s1","text":"x"} {}`,
	`{"session":"s1","text":"x\u0000"}`,
	`-0.0e+1`,
}

func FuzzParseBatchLine(f *testing.F) {
	for _, s := range batchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := parseBatchLine(raw)
		if err != nil {
			if backend.CodeOf(err) != backend.CodeInvalid {
				t.Fatalf("refused with %v, want an invalid-input error", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		// Accepted: what encoding/json reads the same way, nothing repaired.
		if !utf8.Valid(raw) || bytes.HasPrefix(raw, []byte("\ufeff")) || !json.Valid(raw) {
			t.Fatalf("accepted a line encoding/json would repair or refuse: %q", raw)
		}
		for _, s := range []string{in.Session, in.Text, in.RequestID, in.Producer, in.Target} {
			if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(raw, []byte("\ufffd")) && !bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
				t.Fatalf("accepted value %q is not the UTF-8 that was sent", s)
			}
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("accepted a line that is not an object: %v", err)
		}
		for k := range m {
			found := false
			for _, f := range batchFields {
				found = found || k == f
			}
			if !found {
				t.Fatalf("accepted unknown field %q", k)
			}
		}
	})
}

var importSeeds = []string{
	impFile(impSession, impTranscript, impMessage, impAdmission, impAutomation),
	impFile(impSession, impTranscript),
	impFile(strings.Replace(impSession, `"next_seq":3`, `"next_seq":18446744073709551615`, 1), impTranscript),
	impFile(strings.Replace(impSession, `"current_transcript":"n1"`, `"current_transcript":"x"`, 1), impTranscript),
	impFile(impTranscript),
	"\ufeff" + impFile(impSession),
	`{"session":{}}` + "\n",
	`{"admission":{"payload":{"text":"x","text":"y"}}}` + "\n",
	"\n\n\r\n",
	`{"message":{"transcript":"n1","seq":1e3}}`,
}

func FuzzReadRecords(f *testing.F) {
	for _, s := range importSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, lines, err := readRecords(bytes.NewReader(data), &progress{})
		if err == nil {
			err = checkRecords(context.Background(), nil, recs, lines)
		}
		if err != nil {
			if backend.CodeOf(err) != backend.CodeInvalid {
				t.Fatalf("refused with %v, want an invalid-input error", err)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error names no line: %v", err)
			}
			return
		}
		// Accepted records write back as records that read again the same.
		for i, r := range recs {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("record %d does not encode: %v", i+1, err)
			}
			again, err := backend.DecodeRecord(b)
			if err != nil {
				t.Fatalf("record %d re-encoded as %s is refused: %v", i+1, b, err)
			}
			b2, _ := json.Marshal(again)
			if !bytes.Equal(b, b2) {
				t.Fatalf("record %d changes on a second read:\n%s\n%s", i+1, b, b2)
			}
		}
	})
}

// decodeString and decodeStrings decode every value as encoding/json does
// (the same value, or an error where it errs), and their plain paths take
// only values encoding/json reads to the same thing.
func FuzzDecodeStrings(f *testing.F) {
	for _, s := range []string{
		`"plain"`, `""`, `"a\"b"`, `"tab\there"`, "\"raw\ttab\"", "\"caf\xe9\"", `"\ud800"`, `"a"b"`, `"a`, `"`,
		`["a","b"]`, `[]`, ` [ "a" , "b" ] `, `["a",]`, `["a" "b"]`, `[1]`, `["a\u0000"]`, `null`, `"x" `, `["a"]]`,
		"[\"caf\xe9\"]", `[""]`, `["a"`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		var got, want string
		gotErr, wantErr := decodeString(v, &got), json.Unmarshal(v, &want)
		if (gotErr == nil) != (wantErr == nil) || got != want {
			t.Fatalf("decodeString(%q) = %q, %v; encoding/json: %q, %v", v, got, gotErr, want, wantErr)
		}
		if s, ok := plainString(v); ok && (wantErr != nil || string(s) != want) {
			t.Fatalf("plainString(%q) = %q; encoding/json: %q, %v", v, s, want, wantErr)
		}
		var gotList, wantList []string
		gotErr, wantErr = decodeStrings(v, &gotList), json.Unmarshal(v, &wantList)
		if (gotErr == nil) != (wantErr == nil) || (gotErr == nil && !reflect.DeepEqual(gotList, wantList)) {
			t.Fatalf("decodeStrings(%q) = %#v, %v; encoding/json: %#v, %v", v, gotList, gotErr, wantList, wantErr)
		}
		if ss, ok := plainStrings(v); ok && (wantErr != nil || !reflect.DeepEqual(ss, wantList)) {
			t.Fatalf("plainStrings(%q) = %#v; encoding/json: %#v, %v", v, ss, wantList, wantErr)
		}
	})
}
