package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hermesq/hermesq/pkg/backend"
)

// FuzzCanonical: payload canonicalisation never panics; what it accepts is
// a compact JSON object with a string "text", within the limit, and
// canonical already (canonicalising it again changes nothing); what it
// refuses is ErrInvalid.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"text":"hi"}`,
		`{"b":1,"text":"x","a":[1,2,{"z":null,"y":true}]}`,
		`{ "text" : "\u00e9\ud83d\ude00\n" , "n": 1.50e+10 }`,
		`{"text":"x","text":"y"}`,
		`{"text":1}`,
		`[{"text":"x"}]`,
		`{"text":"x"} {}`,
		"{\"text\":\"\xff\"}",
		`{"text":"x","d":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`,
		`{"text":"<&>\u2028"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := Canonical(raw, 0)
		if err != nil {
			if !errors.Is(err, backend.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if len(out) > DefaultMaxPayload {
			t.Fatalf("canonical payload of %d bytes over the limit", len(out))
		}
		if !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("canonical payload is not valid JSON: %q", out)
		}
		// Numbers are kept as written, also those past a float64's
		// range (1e700): JSON has no such limit.
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("canonical payload is not an object: %v", err)
		}
		if _, ok := obj["text"].(string); !ok {
			t.Fatalf("canonical payload without a string text: %q", out)
		}
		again, err := Canonical(out, 0)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("canonical form is not stable:\n%q\n%q (%v)", out, again, err)
		}
	})
}

// FuzzIdentities: identity handling (automation offers, human request ids)
// never panics; an accepted request passes the stores' own check, carries
// each identity once, in offer order, every one valid; a refused one is
// ErrInvalid.
func FuzzIdentities(f *testing.F) {
	f.Add("process", "a\x00b", "", "", false)
	f.Add("process", "completion\x001\x00x", "", "", false)
	f.Add("watch", "a\x00a\x00b", "t1", "", false)
	f.Add("", "", "", "r-1", true)
	f.Add("", "x", "", "", false)
	f.Add("Bad Name", "x", "", "", false)
	f.Add("process", "\x00", "", "", false)
	f.Add("process", strings.Repeat("i", 1025), "", "", false)
	f.Fuzz(func(t *testing.T, producer, identities, target, requestID string, reopen bool) {
		var ids []string
		if identities != "" {
			ids = strings.Split(identities, "\x00")
		}
		s := &Service{}
		in := Input{Session: "s1", Text: "x", Producer: producer, Identities: ids, Target: target,
			RequestID: requestID, Principal: "alice", Reopen: reopen}
		req, err := s.request(in)
		if err != nil {
			if !errors.Is(err, backend.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if err := backend.CheckAdmitRequest(req); err != nil {
			t.Fatalf("accepted request fails the stores' check: %v", err)
		}
		seen := map[string]bool{}
		j := 0
		for _, id := range req.Identities {
			if seen[id] {
				t.Fatalf("identity %q twice", id)
			}
			seen[id] = true
			for j < len(ids) && ids[j] != id {
				j++
			}
			if j == len(ids) {
				t.Fatalf("identities %q not in offer order %q", req.Identities, ids)
			}
		}
		if len(seen) != len(uniq(ids)) {
			t.Fatalf("identities %q lost some of %q", req.Identities, ids)
		}
	})
}

func uniq(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}
