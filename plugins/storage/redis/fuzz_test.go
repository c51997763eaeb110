package redis

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hermesq/hermesq/pkg/backend"
)

// FuzzReplyDecoder: the decoders of script replies (an admission record
// with its payload and identities, a transcript record, a session reply)
// never panic on anything a server could send; what they refuse is
// ErrInternal; records are read as encoding/json reads them.
func FuzzReplyDecoder(f *testing.F) {
	f.Add(`{"id":"a","session":"s1","seq":1,"kind":"human","principal":"p","status":"queued","admitted_at":1}`, `{"text":"x"}`, "i1\x00i2",
		"id\x00s1\x00owner\x00alice\x00current\x00s1\x00epoch\x003", "bob\x00{\"role\":\"writer\"}")
	f.Add(`{"id":"t","session":"s1","n":2,"message_count":2}`, "", "", "", "bob\x00not json")
	f.Add("", "", "", "odd", "x")
	f.Add("[]", "null", "\x00", "\x00\x00\x00", "\x00")
	f.Add(`{"seq":20700000000000000000,"epoch":1e2,"id":"a","ID":"b","Id":"c","status":"\ud800\udc00\ud800"}`, "", "", "", "")
	f.Add("{\"ID\":\"a\u2028\xff\",\"id\":\"b\",\"seq\":1e2,\"metadata\":{\"k\":[1,2.5,null]},\"n\":-1}", "", "", "", "")
	f.Fuzz(func(t *testing.T, rec, payload, idents, flat, grants string) {
		ok := func(what string, err error) {
			if err != nil && !errors.Is(err, backend.ErrInternal) {
				t.Fatalf("%s: error %v is not ErrInternal", what, err)
			}
		}
		_, err := decodeAdmission(rec, payload, idents)
		ok("admission", err)
		// Records are read as encoding/json reads them: the same
		// refusals, the same values.
		for _, fresh := range []func() any{func() any { return &admRec{} }, func() any { return &trRec{} }, func() any { return &msgRec{} }} {
			ours, std := fresh(), fresh()
			oursErr, stdErr := readRecord(rec, ours), json.Unmarshal([]byte(rec), std)
			if (oursErr == nil) != (stdErr == nil) {
				t.Fatalf("%q: readRecord says %v, encoding/json %v", rec, oursErr, stdErr)
			}
			if d := cmp.Diff(std, ours); oursErr == nil && d != "" {
				t.Fatalf("%q reads unlike encoding/json (-std +ours):\n%s", rec, d)
			}
		}
		_, _, err = decodeTranscript(rec)
		ok("transcript", err)
		toAny := func(s string) []any {
			var out []any
			if s == "" {
				return out
			}
			for _, p := range strings.Split(s, "\x00") {
				out = append(out, p)
			}
			return out
		}
		reply := []any{"ok", toAny(flat), toAny(grants), int64(len(rec)), int64(1), "x", int64(-1), rec}
		_, err = decodeSession(reply)
		ok("session", err)
		_, err = decodeSession(reply[:len(flat)%8])
		ok("short session", err)
	})
}

// FuzzStoreURL: store URL parsing never panics; a URL it accepts has a
// host and a prefix without braces; a refusal is ErrInvalid; neither the
// parsed configuration nor the error ever shows the password.
func FuzzStoreURL(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379/0",
		"redis://user:s3cret-pw@h1:1,h2:2/3?prefix=x&cluster=1",
		"rediss://:s3cret-pw@h/0?ca=/x&insecure_skip_verify=1&server_name=n",
		"redis://s3cret-pw@h:99999/x",
		"redis://h/0?sentinel=m&prefix={x}",
		"redis://h/0?unknown=1",
		"redis://[::1]:6379/-1",
		"bbolt:///tmp/x.db",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		c, err := ParseURL(u)
		pass := ""
		if u.User != nil {
			p, set := u.User.Password()
			if !set {
				p = u.User.Username()
			}
			pass = p
		}
		// The password leaks when a message shows it, unless the URL
		// also holds the same string outside its user part.
		rest := *u
		rest.User = nil
		leaks := func(s string) bool {
			return len(pass) >= 6 && strings.Contains(s, pass) && !strings.Contains(rest.String(), pass) && !strings.Contains(raw[strings.Index(raw, "@")+1:], pass)
		}
		if err != nil {
			if !errors.Is(err, backend.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			if leaks(err.Error()) {
				t.Fatalf("error shows the password: %v", err)
			}
			return
		}
		if len(c.Hosts) == 0 || c.Prefix == "" || strings.ContainsAny(c.Prefix, "{}") {
			t.Fatalf("accepted %q as %+v", raw, c.Hosts)
		}
		if leaks(c.String()) {
			t.Fatalf("configuration shows the password: %s", c.String())
		}
	})
}

// FuzzMessageEncode: a message record is written exactly as json.Marshal
// writes it, whatever its text and metadata.
func FuzzMessageEncode(f *testing.F) {
	f.Add("note", "a<b>&\u2028\xff", "01a2", int64(1), `{"admission_id":"x","identities":["w:1","<w:2>"],"n":[1e21,1.5,-0,null,true],"z":{"b":1,"a":"\u2029"}}`)
	f.Add("user", "", "", int64(0), `{}`)
	f.Add("assistant", "x", "a", int64(-1), `null`)
	f.Fuzz(func(t *testing.T, role, content, admission string, ns int64, metadata string) {
		var md map[string]any
		if json.Unmarshal([]byte(metadata), &md) != nil {
			return
		}
		at := time.Unix(0, ns)
		ours, err := encodeMessage(backend.Role(role), content, admission, at, md)
		std, serr := json.Marshal(msgRec{Role: backend.Role(role), Content: content, AdmissionID: admission, CreatedAt: nsOf(at), Metadata: md})
		if (err == nil) != (serr == nil) || ours != string(std) {
			t.Fatalf("message written unlike json.Marshal:\nours %s (%v)\nstd  %s (%v)", ours, err, std, serr)
		}
	})
}
