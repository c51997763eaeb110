package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/admission/admissiontest"
	"github.com/hermesq/hermesq/pkg/backend"
)

func TestCanonical(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"text":"hi"}`, `{"text":"hi"}`},
		{" {\n \"text\" : \"hi\" ,\t\"a\" : 1 }\n", `{"a":1,"text":"hi"}`},
		{`{"b":1,"a":{"d":[1,{"z":true,"y":null}],"c":"x"},"text":"hi"}`, `{"a":{"c":"x","d":[1,{"y":null,"z":true}]},"b":1,"text":"hi"}`},
		{`{"text":"\u00e9\/<>&\u2028"}`, "{\"text\":\"é/<>&\u2028\"}"},
		{`{"text":"a\u0001\"\\\n\t"}`, `{"text":"a\u0001\"\\\n\t"}`},
		{`{"text":"x","n":1.50,"m":-2e3,"e":[],"o":{}}`, `{"e":[],"m":-2e3,"n":1.50,"o":{},"text":"x"}`},
		{`{"text":"x","B":1,"a":2,"é":3}`, `{"B":1,"a":2,"text":"x","é":3}`},
	}
	for _, c := range cases {
		got, err := admission.Canonical([]byte(c.in), 0)
		if err != nil {
			t.Errorf("Canonical(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Canonical(%s)\n got  %s\n want %s", c.in, got, c.want)
		}
		again, err := admission.Canonical(got, 0)
		if err != nil || string(again) != string(got) {
			t.Errorf("Canonical is not idempotent on %s: %s %v", got, again, err)
		}
		if !json.Valid(got) {
			t.Errorf("Canonical(%s) = %s is not valid JSON", c.in, got)
		}
	}
}

func TestCanonicalRejects(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 1200) + `1` + strings.Repeat(`}`, 1200)
	cases := []struct {
		name, in string
		limit    int
		want     string // in the message
	}{
		{"empty", ``, 0, "payload is empty"},
		{"blank", "  \n", 0, "payload is empty"},
		{"not json", `{text:1}`, 0, "not valid json"},
		{"truncated", `{"text":"x"`, 0, "not valid json"},
		{"array", `["text"]`, 0, "not a json object"},
		{"string", `"text"`, 0, "not a json object"},
		{"null", `null`, 0, "not a json object"},
		{"no text", `{"a":"x"}`, 0, `no "text"`},
		{"text number", `{"text":1}`, 0, `"text" is not a string`},
		{"text null", `{"text":null}`, 0, `"text" is not a string`},
		{"text empty", `{"text":""}`, 0, `"text" is empty`},
		{"duplicate key", `{"text":"a","text":"b"}`, 0, `duplicate key "text"`},
		{"nested duplicate", `{"text":"a","o":{"k":1,"k":2}}`, 0, `duplicate key "k"`},
		{"trailing data", `{"text":"a"} {"text":"b"}`, 0, "data after"},
		{"trailing garbage", `{"text":"a"}x`, 0, "data after"},
		{"invalid utf-8", "{\"text\":\"\xff\"}", 0, "utf-8"},
		{"too large", `{"text":"0123456789"}`, 10, "more than the limit of 10"},
		{"limit too large", `{"text":"x"}`, admission.MaxPayloadLimit + 1, "payload limit"},
		{"negative limit", `{"text":"x"}`, -1, "payload limit"},
		{"too deep", `{"text":"x","d":` + deep + `}`, 0, "nested deeper"},
		{"nan", `{"text":"x","n":NaN}`, 0, "not valid json"},
	}
	for _, c := range cases {
		_, err := admission.Canonical([]byte(c.in), c.limit)
		if !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", c.name, err)
			continue
		}
		checkMessage(t, c.name, err, c.want)
	}
}

// The limit is on the canonical form: whitespace does not count.
func TestCanonicalLimitAfterCanonicalisation(t *testing.T) {
	in := `{ "text" :   "0123456789" }` // 27 bytes; canonical: 21
	if _, err := admission.Canonical([]byte(in), 21); err != nil {
		t.Errorf("21-byte canonical payload under a 21-byte limit: %v", err)
	}
	if _, err := admission.Canonical([]byte(in), 20); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("21-byte canonical payload under a 20-byte limit: %v, want invalid", err)
	}
}

// checkMessage: one line, lower case, naming what is wrong.
func checkMessage(t *testing.T, name string, err error, want string) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("%s: message %q is not one line", name, msg)
	}
	if r := []rune(msg)[0]; unicode.IsUpper(r) {
		t.Errorf("%s: message %q does not start in lower case", name, msg)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("%s: message %q does not say %q", name, msg, want)
	}
}

// countingStore is the real store counting Admit calls.
type countingStore struct {
	backend.Store
	admits atomic.Int32
}

func (c *countingStore) Admit(ctx context.Context, reqs []backend.AdmitRequest) ([]backend.AdmitResult, error) {
	c.admits.Add(1)
	return c.Store.Admit(ctx, reqs)
}

func TestAdmitValidation(t *testing.T) {
	long := strings.Repeat("x", 1025)
	parts := func(ids ...string) []admission.Part {
		out := make([]admission.Part, len(ids))
		for i, id := range ids {
			out[i] = admission.Part{Identity: id, Text: "result of " + id}
		}
		return out
	}
	human := func(f func(*admission.Input)) admission.Input {
		in := admission.Input{Session: "s1", Text: "hi", Principal: "alice"}
		f(&in)
		return in
	}
	auto := func(f func(*admission.Input)) admission.Input {
		in := admission.Input{Session: "s1", Text: "hi", Principal: "alice", Producer: "process", Identities: []string{"i1"}}
		f(&in)
		return in
	}
	cases := []struct {
		name string
		in   admission.Input
		want string
	}{
		{"empty session", human(func(in *admission.Input) { in.Session = "" }), "session id is empty"},
		{"bad session", human(func(in *admission.Input) { in.Session = "a b" }), "session id"},
		{"long session", human(func(in *admission.Input) { in.Session = strings.Repeat("s", 257) }), "session id is 257 bytes"},
		{"empty text", human(func(in *admission.Input) { in.Text = "" }), "text is empty"},
		{"invalid utf-8 text", human(func(in *admission.Input) { in.Text = "\xff" }), "text is not valid utf-8"},
		{"text and payload", human(func(in *admission.Input) { in.Payload = []byte(`{"text":"x"}`) }), "text and payload"},
		{"bad payload", human(func(in *admission.Input) { in.Text, in.Payload = "", []byte(`{"text":""}`) }), `payload "text" is empty`},
		{"payload not object", human(func(in *admission.Input) { in.Text, in.Payload = "", []byte(`[1]`) }), "payload is not a json object"},
		{"no principal", human(func(in *admission.Input) { in.Principal = "" }), "principal is empty"},
		{"long principal", human(func(in *admission.Input) { in.Principal = long }), "principal is 1025 bytes"},
		{"human identities", human(func(in *admission.Input) { in.Identities = []string{"i"} }), "identities need a producer"},
		{"human target", human(func(in *admission.Input) { in.Target = "t" }), "target needs a producer"},
		{"long request id", human(func(in *admission.Input) { in.RequestID = long }), "request id is 1025 bytes"},
		{"nul request id", human(func(in *admission.Input) { in.RequestID = "a\x00b" }), "request id contains a NUL byte"},
		{"automation request id", auto(func(in *admission.Input) { in.RequestID = "r1" }), "request id is for human input only"},
		{"automation reopen", auto(func(in *admission.Input) { in.Reopen = true }), "reopen is for human input only"},
		{"no identities", auto(func(in *admission.Input) { in.Identities = nil }), "identities are empty"},
		{"empty identity", auto(func(in *admission.Input) { in.Identities = []string{"a", ""} }), "identity is empty"},
		{"long identity", auto(func(in *admission.Input) { in.Identities = []string{long} }), "identity is 1025 bytes"},
		{"nul identity", auto(func(in *admission.Input) { in.Identities = []string{"a\x00"} }), "identity contains a NUL byte"},
		{"bad target", auto(func(in *admission.Input) { in.Target = "t t" }), "target id"},
		{"long producer", auto(func(in *admission.Input) { in.Producer = long }), "producer name is 1025 bytes"},
		{"human parts", human(func(in *admission.Input) { in.Text, in.Parts = "", parts("a", "b") }), "parts need a producer"},
		{"parts and text", auto(func(in *admission.Input) { in.Parts = parts("a") }), "parts replace text and payload"},
		{"parts and payload", auto(func(in *admission.Input) { in.Text, in.Payload, in.Parts = "", []byte(`{"text":"x"}`), parts("a") }), "parts replace text and payload"},
		{"identities not the parts'", auto(func(in *admission.Input) { in.Text, in.Identities, in.Parts = "", []string{"b"}, parts("a") }), `part 1 is for identity "a" but identity 1 is "b"`},
		{"more identities than parts", auto(func(in *admission.Input) { in.Text, in.Identities, in.Parts = "", []string{"a", "b"}, parts("a") }), "2 identities for 1 parts"},
		{"part without identity", auto(func(in *admission.Input) { in.Text, in.Identities, in.Parts = "", nil, parts("") }), "part 1 identity is empty"},
		{"part twice", auto(func(in *admission.Input) { in.Text, in.Identities, in.Parts = "", nil, parts("a", "a") }), `identity "a" has two parts`},
		{"part without text", auto(func(in *admission.Input) {
			in.Text, in.Identities, in.Parts = "", nil, []admission.Part{{Identity: "a"}}
		}), "part 1: text is empty"},
		{"part with text and payload", auto(func(in *admission.Input) {
			in.Text, in.Identities, in.Parts = "", nil, []admission.Part{{Identity: "a", Text: "x", Payload: []byte(`{"text":"x"}`)}}
		}), "part 1 has both text and payload"},
		{"part with bad payload", auto(func(in *admission.Input) {
			in.Text, in.Identities, in.Parts = "", nil, []admission.Part{{Identity: "a", Payload: []byte(`{"text":1}`)}}
		}), `part 1: payload "text" is not a string`},
		{"parts over the limit together", auto(func(in *admission.Input) {
			big := strings.Repeat("x", 600<<10)
			in.Text, in.Identities, in.Parts = "", nil, []admission.Part{{Identity: "a", Text: big}, {Identity: "b", Text: big}}
		}), "parts compose a payload of"},
	}
	st := &countingStore{Store: newBolt(t)}
	svc := &admission.Service{Store: st}
	ctx := context.Background()
	for _, c := range cases {
		r, err := svc.Admit(ctx, c.in)
		if !errors.Is(err, backend.ErrInvalid) || !errors.Is(r.Err, backend.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", c.name, err)
			continue
		}
		checkMessage(t, c.name, err, c.want)
	}
	if n := st.admits.Load(); n != 0 {
		t.Errorf("invalid inputs reached the store %d times", n)
	}
	if _, err := st.GetSession(ctx, "s1", time.Time{}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("session after invalid inputs: %v, want not found", err)
	}
}

func TestPayloadLimit(t *testing.T) {
	ctx := context.Background()
	st := newBolt(t)
	small := &admission.Service{Store: st, MaxPayload: 21}
	if _, err := small.Admit(ctx, admission.Input{Session: "s1", Text: "0123456789", Principal: "a"}); err != nil {
		t.Errorf("21-byte payload under a 21-byte limit: %v", err)
	}
	_, err := small.Admit(ctx, admission.Input{Session: "s1", Text: "0123456789a", Principal: "a"})
	if !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("22-byte payload under a 21-byte limit: %v, want invalid", err)
	} else {
		checkMessage(t, "too large", err, "payload is 22 bytes after canonicalisation, more than the limit of 21")
	}
	big := &admission.Service{Store: st, MaxPayload: admission.MaxPayloadLimit + 1}
	if _, err := big.Admit(ctx, admission.Input{Session: "s1", Text: "x", Principal: "a"}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("limit above 4 MiB: %v, want invalid", err)
	}
	// The default limit is 1 MiB of canonical payload.
	def := &admission.Service{Store: st}
	text := strings.Repeat("x", admission.DefaultMaxPayload-len(`{"text":""}`))
	if _, err := def.Admit(ctx, admission.Input{Session: "s1", Text: text, Principal: "a"}); err != nil {
		t.Errorf("exactly 1 MiB: %v", err)
	}
	if _, err := def.Admit(ctx, admission.Input{Session: "s1", Text: text + "x", Principal: "a"}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("1 MiB + 1: %v, want invalid", err)
	}
}

func TestAdmitStoresCanonicalPayloadAndDedupesIdentities(t *testing.T) {
	ctx := context.Background()
	svc := &admission.Service{Store: newBolt(t)}
	r, err := svc.Admit(ctx, admission.Input{Session: "s1", Payload: []byte(`{ "z":1, "text":"hi" }`), Principal: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Admission.Payload); got != `{"text":"hi","z":1}` {
		t.Errorf("stored payload %s", got)
	}
	if r.Admission.Kind != backend.KindHuman || r.Admission.Principal != "a" {
		t.Errorf("admission %+v", r.Admission)
	}
	r, err = svc.Admit(ctx, admission.Input{Session: "s1", Text: "c", Principal: "a", Producer: "process", Identities: []string{"i1", "i2", "i1"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result != backend.ResultCoalesced || strings.Join(r.Admission.Identities, ",") != "i1,i2" {
		t.Errorf("offer [i1 i2 i1]: %q %q, want coalesced [i1 i2]", r.Result, r.Admission.Identities)
	}
	if r.Admission.PinnedTarget != "s1" {
		t.Errorf("pinned target %q, want the current transcript s1", r.Admission.PinnedTarget)
	}
	// Automation input needs an existing session: it never creates one.
	if _, err := svc.Admit(ctx, admission.Input{Session: "nope", Text: "c", Principal: "a", Producer: "process", Identities: []string{"x"}}); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("automation to an unknown session: %v, want not found", err)
	}
}

func TestAdmitBatch(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Store: newBolt(t)}
	svc := &admission.Service{Store: st}
	res, err := svc.AdmitBatch(ctx, []admission.Input{
		{Session: "s1", Text: "one", Principal: "a"},
		{Session: "s 1", Text: "bad", Principal: "a"},
		{Session: "s1", Text: "two", Principal: "a"},
		{Session: "s1", Text: "", Principal: "a"},
		{Session: "s1", Text: "c", Principal: "a", Producer: "process", Identities: []string{"i1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 {
		t.Fatalf("%d results, want 5", len(res))
	}
	for _, i := range []int{1, 3} {
		if !errors.Is(res[i].Err, backend.ErrInvalid) {
			t.Errorf("result %d: %v, want invalid", i, res[i].Err)
		}
	}
	var seqs []uint64
	for _, i := range []int{0, 2, 4} {
		if res[i].Err != nil || res[i].Result != backend.ResultAdmitted {
			t.Errorf("result %d: %q %v, want admitted", i, res[i].Result, res[i].Err)
		}
		seqs = append(seqs, res[i].Admission.Seq)
	}
	if !(seqs[0] < seqs[1] && seqs[1] < seqs[2]) {
		t.Errorf("seqs %v not increasing in input order", seqs)
	}
	if n := st.admits.Load(); n != 1 {
		t.Errorf("%d Store.Admit calls, want 1", n)
	}
	// All invalid: no store call at all.
	if _, err := svc.AdmitBatch(ctx, []admission.Input{{Session: ""}}); err != nil {
		t.Fatal(err)
	}
	if n := st.admits.Load(); n != 1 {
		t.Errorf("%d Store.Admit calls after an all-invalid batch, want 1", n)
	}
}

func TestAdmitJSON(t *testing.T) {
	ctx := context.Background()
	svc := &admission.Service{Store: newBolt(t)}
	r, err := svc.Admit(ctx, admission.Input{Session: "s1", Text: "hi", Principal: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admission.AdmitJSON(r))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"result", "admission", "identities", "payload_differs"} {
		if _, ok := got[k]; !ok {
			t.Errorf("admit JSON %s has no %q", b, k)
		}
	}
	if len(got) != 4 || string(got["result"]) != `"admitted"` || string(got["identities"]) != `{}` || string(got["payload_differs"]) != `false` {
		t.Errorf("admit JSON %s", b)
	}
	var a map[string]any
	_ = json.Unmarshal(got["admission"], &a)
	if a["id"] != r.Admission.ID || a["status"] != "queued" || a["request_id"] != nil {
		t.Errorf("admission JSON %s", got["admission"])
	}
	_, err = svc.Admit(ctx, admission.Input{Session: "", Text: "hi", Principal: "a"})
	b, _ = json.Marshal(admission.AdmitJSON(backend.AdmitResult{Err: err}))
	if !regexp.MustCompile(`^\{"error":"invalid","message":"session id is empty: invalid"\}$`).Match(b) {
		t.Errorf("error JSON %s", b)
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id := admission.NewID()
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) || seen[id] {
			t.Fatalf("NewID() = %q (seen %v)", id, seen[id])
		}
		seen[id] = true
	}
}

func TestDrainOptionsValidated(t *testing.T) {
	ctx := context.Background()
	svc := &admission.Service{Store: newBolt(t)}
	bad := []admission.DrainOptions{
		{OnUnknown: "ignore"},
		{Lease: -1},
		{Lease: 2},
		{Lease: admission.MinLease - 1},
		{Max: -1},
		{Grace: -1},
		{Handler: &admission.Handler{}},
		{Handler: &admission.Handler{Argv: []string{"x"}, Timeout: -1}},
	}
	for _, opt := range bad {
		if _, err := svc.Drain(ctx, "s1", opt); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("Drain with %+v: %v, want invalid", opt, err)
		}
	}
	if _, err := svc.Drain(ctx, "bad id", admission.DrainOptions{}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("Drain of a bad session id: %v, want invalid", err)
	}
	if _, err := svc.AddViewer(ctx, "s1", -1); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("AddViewer with a negative ttl: %v, want invalid", err)
	}
}

// oneHuman is a fresh bbolt store with one human input "hi" queued to s1.
func oneHuman(t *testing.T) (ctx context.Context, st backend.Store, svc *admission.Service, id string) {
	t.Helper()
	ctx = context.Background()
	st = newBolt(t)
	svc = &admission.Service{Store: st}
	r, err := svc.Admit(ctx, admission.Input{Session: "s1", Text: "hi", Principal: "a"})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, st, svc, r.Admission.ID
}

// A handler that cannot be started is a configuration error: the admission
// is given back, not spent.
func TestHandlerThatCannotStart(t *testing.T) {
	ctx, st, svc, id := oneHuman(t)
	_, err := svc.Drain(ctx, "s1", admission.DrainOptions{Principal: "a", Handler: &admission.Handler{Argv: []string{"/nonexistent/handler"}}})
	if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "/nonexistent/handler") {
		t.Errorf("drain: %v, want invalid naming the handler", err)
	}
	a, err := st.GetAdmission(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != backend.StatusQueued {
		t.Errorf("admission %s after a handler that cannot start, want queued", a.Status)
	}
}

// A handler timeout runs from the handler's start: however short, it fails
// the turn ("timeout"), never reads as a handler that cannot be started.
func TestHandlerTimeoutShorterThanStart(t *testing.T) {
	ctx, st, svc, id := oneHuman(t)
	h := &admission.Handler{Argv: []string{"sh", "-c", "cat >/dev/null; exec sleep 60"}, Timeout: time.Nanosecond}
	rep, err := svc.Drain(ctx, "s1", admission.DrainOptions{Principal: "a", Handler: h})
	if !errors.Is(err, backend.ErrAttention) || rep.Failed != 1 {
		t.Errorf("drain: %v (%d failed), want attention with 1 failed turn", err, rep.Failed)
	}
	a, err := st.GetAdmission(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != backend.OutcomeFailed || !strings.Contains(a.Error, "timeout") {
		t.Errorf("admission %s/%s error %q, want done/failed with a timeout", a.Status, a.Outcome, a.Error)
	}
}

// A reply larger than the limit fails the turn; one at the limit is kept.
func TestReplyLimit(t *testing.T) {
	ctx := context.Background()
	st := newBolt(t)
	svc := &admission.Service{Store: st}
	bin := admissiontest.HandlerBinary(t)
	for _, c := range []struct {
		size int
		want string
	}{
		{admission.MaxPayloadLimit, "done/completed"},
		{admission.MaxPayloadLimit + 1, "done/failed"},
	} {
		r, err := svc.Admit(ctx, admission.Input{Session: "s1", Text: "big", Principal: "a"})
		if err != nil {
			t.Fatal(err)
		}
		h := &admission.Handler{Argv: []string{bin}, Env: []string{"HQT_BIG=" + strconv.Itoa(c.size)}}
		_, _ = svc.Drain(ctx, "s1", admission.DrainOptions{Principal: "a", Handler: h})
		a, err := st.GetAdmission(ctx, r.Admission.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(a.Status) + "/" + string(a.Outcome); got != c.want {
			t.Errorf("reply of %d bytes: %s (%q), want %s", c.size, got, a.Error, c.want)
		}
	}
	ms, err := st.ListMessages(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || len(ms[1].Content) != admission.MaxPayloadLimit {
		t.Errorf("%d messages, want the 2 of the first turn with the whole reply", len(ms))
	}
}

// Draining needs a right (issue 24, item 1): Drain of a session the
// principal may not drain is ErrForbidden and writes nothing; DrainAll
// drains what it may, leaves the rest out and counts it; an admin
// (AsOwner) drains each session as its owner.
func TestDrainRight(t *testing.T) {
	ctx := context.Background()
	st := newBolt(t)
	svc := &admission.Service{Store: st}
	for _, s := range []struct{ session, owner string }{{"a1", "alice"}, {"b1", "bob"}, {"a2", "alice"}} {
		if _, err := svc.Admit(ctx, admission.Input{Session: s.session, Text: "input of " + s.owner, Principal: s.owner}); err != nil {
			t.Fatal(err)
		}
	}
	h := &admission.Handler{Argv: []string{"sh", "-c", "cat >/dev/null; echo ok"}}
	before, _ := st.GetSession(ctx, "a1", time.Time{})
	if _, err := svc.Drain(ctx, "a1", admission.DrainOptions{Principal: "bob", Handler: h}); !errors.Is(err, backend.ErrForbidden) {
		t.Fatalf("bob drains alice's session: %v, want forbidden", err)
	}
	if after, _ := st.GetSession(ctx, "a1", time.Time{}); after.Epoch != before.Epoch || after.Queued != 1 {
		t.Fatalf("a refused drain changed the session: epoch %d→%d, queued %d", before.Epoch, after.Epoch, after.Queued)
	}

	var leftOut atomic.Int64
	reps, err := svc.DrainAll(ctx, admission.DrainOptions{Principal: "bob", Handler: h, LeftOut: func(n int) { leftOut.Add(int64(n)) }}, 2)
	if err != nil || len(reps) != 1 || reps[0].Session != "b1" || reps[0].Turns != 1 {
		t.Fatalf("drain --all as bob: %+v, %v; want b1's one turn", reps, err)
	}
	if leftOut.Load() != 2 {
		t.Errorf("drain --all as bob left out %d sessions, want 2", leftOut.Load())
	}

	// Granted drainer on a1, bob drains it; a2 is still left out.
	if err := st.Grant(ctx, "a1", backend.Grant{Principal: "bob", Role: backend.RoleDrainer}); err != nil {
		t.Fatal(err)
	}
	leftOut.Store(0)
	reps, err = svc.DrainAll(ctx, admission.DrainOptions{Principal: "bob", Handler: h, LeftOut: func(n int) { leftOut.Add(int64(n)) }}, 2)
	if err != nil || len(reps) != 1 || reps[0].Session != "a1" || leftOut.Load() != 1 {
		t.Fatalf("drain --all as a granted bob: %+v, %v, left out %d; want a1 drained, a2 left out", reps, err, leftOut.Load())
	}
	// An admin drains as each owner.
	reps, err = svc.DrainAll(ctx, admission.DrainOptions{Principal: "root", AsOwner: true, Handler: h}, 2)
	if err != nil || len(reps) != 1 || reps[0].Session != "a2" {
		t.Fatalf("drain --all as an admin: %+v, %v; want a2 drained", reps, err)
	}
}
