package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Input is one offer, as a CLI flag set or an --batch NDJSON line gives it.
type Input struct {
	Session    string          `json:"session"`
	Text       string          `json:"text"`       // becomes payload {"text": Text} when Payload is empty
	Payload    json.RawMessage `json:"payload"`    // a JSON object with a non-empty string "text"
	RequestID  string          `json:"request_id"` // human only
	Producer   string          `json:"producer"`   // non-empty: automation input
	Identities []string        `json:"identities"` // automation: at least one
	Target     string          `json:"target"`     // automation: pinned transcript (default: session's current)
	Principal  string          `json:"-"`          // set by the caller, never from input
	Reopen     bool            `json:"-"`

	// Parts gives each identity of an automation offer its own part
	// (instead of Text or Payload for the whole group): the admission made
	// of the identities not yet held carries their parts alone, so a
	// regrouped re-offer notes every result exactly once. Identities may
	// then be left out; given, they must name the parts' identities in
	// order.
	Parts []Part `json:"parts"`
}

// Part is one identity's own text or payload in a group offer.
type Part struct {
	Identity string          `json:"identity"`
	Text     string          `json:"text"`    // becomes payload {"text": Text} when Payload is empty
	Payload  json.RawMessage `json:"payload"` // a JSON object with a non-empty string "text"
}

// maxNesting bounds how deep a payload may nest, so a hostile payload cannot
// make canonicalisation recurse without end.
const maxNesting = backend.MaxPayloadNesting

// maxRawPayload bounds the bytes parsed before the canonical size is known:
// whitespace and escapes may shrink a payload, but not by more than this.
const maxRawPayload = 4 * MaxPayloadLimit

func invalidf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, backend.ErrInvalid)...)
}

// GroupTooLargeError is the refusal of an offer whose parts, each within
// the limit, compose a payload over it (backend.ErrInvalid): offered in
// smaller groups, they fit.
type GroupTooLargeError struct{ Size, Limit int }

func (e *GroupTooLargeError) Error() string {
	return fmt.Sprintf("parts compose a payload of %d bytes, more than the limit of %d: %v", e.Size, e.Limit, backend.ErrInvalid)
}

func (e *GroupTooLargeError) Unwrap() error { return backend.ErrInvalid }

// PayloadLimit is the service's effective payload limit in bytes (that of
// a composed payload too).
func (s *Service) PayloadLimit() int {
	limit, err := checkLimit(s.MaxPayload)
	if err != nil {
		return DefaultMaxPayload
	}
	return limit
}

// checkLimit returns the effective payload limit for a configured one.
func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultMaxPayload, nil
	case limit < 0 || limit > MaxPayloadLimit:
		return 0, invalidf("payload limit %d is outside 1..%d bytes", limit, MaxPayloadLimit)
	}
	return limit, nil
}

// Canonical validates a payload and returns its canonical form: a JSON
// object with a non-empty string "text", keys sorted byte-wise at every
// level, no insignificant whitespace, strings as UTF-8 with only the escapes
// JSON requires, numbers as written. Canonical form is what the store
// compares when a request id is reused, so two spellings of the same object
// are the same payload.
//
// Duplicate keys are refused rather than resolved: JSON parsers disagree on
// which one wins, and a durable queue must not guess what the producer
// meant. limit is the largest canonical size in bytes (0: 1 MiB; at most
// 4 MiB). Every failure wraps backend.ErrInvalid.
func Canonical(raw []byte, limit int) (json.RawMessage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, invalidf("payload is empty")
	}
	if len(raw) > maxRawPayload {
		return nil, invalidf("payload is %d bytes, more than the limit of %d", len(raw), limit)
	}
	if !utf8.Valid(raw) {
		return nil, invalidf("payload is not valid utf-8")
	}
	// Strict first: a byte-order mark, a lone surrogate escape or a
	// repeated key is refused with its name, never repaired.
	if err := backend.CheckJSON(raw); err != nil {
		return nil, invalidf("payload is not valid json: %s", strings.TrimSuffix(err.Error(), ": "+backend.ErrInvalid.Error()))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, invalidf("payload is not valid json: %s", oneLine(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalidf("payload has data after the json object")
	}
	obj, ok := v.(object)
	if !ok {
		return nil, invalidf("payload is not a json object")
	}
	text, ok := obj.get("text")
	if !ok {
		return nil, invalidf("payload has no \"text\"")
	}
	s, ok := text.(string)
	if !ok {
		return nil, invalidf("payload \"text\" is not a string")
	}
	if s == "" {
		return nil, invalidf("payload \"text\" is empty")
	}
	var buf bytes.Buffer
	writeCanonical(&buf, obj)
	if buf.Len() > limit {
		return nil, invalidf("payload is %d bytes after canonicalisation, more than the limit of %d", buf.Len(), limit)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// textPayload builds the canonical payload {"text": text}.
func textPayload(text string, limit int) (json.RawMessage, error) {
	limit, err := checkLimit(limit)
	if err != nil {
		return nil, err
	}
	if text == "" {
		return nil, invalidf("text is empty")
	}
	if !utf8.ValidString(text) {
		return nil, invalidf("text is not valid utf-8")
	}
	var buf bytes.Buffer
	writeCanonical(&buf, object{{"text", text}})
	if buf.Len() > limit {
		return nil, invalidf("payload is %d bytes after canonicalisation, more than the limit of %d", buf.Len(), limit)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// object is a parsed JSON object, members in input order.
type object []member

type member struct {
	key string
	val any
}

func (o object) get(k string) (any, bool) {
	for _, m := range o {
		if m.key == k {
			return m.val, true
		}
	}
	return nil, false
}

// parseValue reads one JSON value from dec: object, []any, string,
// json.Number, bool or nil.
func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("nested deeper than %d levels", maxNesting)
	}
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, errors.New("unexpected end of input")
	}
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var obj object
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				if seen[k] {
					return nil, fmt.Errorf("duplicate key %s", strconv.Quote(k))
				}
				seen[k] = true
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				obj = append(obj, member{k, v})
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			if obj == nil {
				obj = object{}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return arr, nil
		default:
			return nil, fmt.Errorf("unexpected %q", rune(t))
		}
	default:
		return t, nil // string, json.Number, bool, nil
	}
}

// writeCanonical writes v in canonical form.
func writeCanonical(buf *bytes.Buffer, v any) {
	switch t := v.(type) {
	case object:
		sorted := make(object, len(t))
		copy(sorted, t)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].key < sorted[j].key })
		buf.WriteByte('{')
		for i, m := range sorted {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, m.key)
			buf.WriteByte(':')
			writeCanonical(buf, m.val)
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeCanonical(buf, e)
		}
		buf.WriteByte(']')
	case string:
		writeString(buf, t)
	case json.Number:
		buf.WriteString(string(t))
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	}
}

// writeString quotes s as canonical form writes strings.
func writeString(buf *bytes.Buffer, s string) {
	buf.Write(backend.AppendJSONString(buf.AvailableBuffer(), s))
}

// oneLine keeps an error message on one line.
func oneLine(err error) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte("\n"), []byte(" ")))
}

// request validates in and turns it into a store request. Validation
// happens here, once, so every store receives only well-formed requests and
// every caller (flags, --batch lines, producers) gets the same messages.
func (s *Service) request(in Input) (backend.AdmitRequest, error) {
	var req backend.AdmitRequest
	if err := backend.ValidateID("session", in.Session); err != nil {
		return req, err
	}
	if err := backend.ValidatePrincipal(in.Principal); err != nil {
		return req, err
	}
	var payload json.RawMessage
	var parts []backend.Part
	var err error
	switch {
	case len(in.Parts) > 0:
		if in.Producer == "" {
			return req, invalidf("parts need a producer (automation input)")
		}
		if len(in.Payload) > 0 || in.Text != "" {
			return req, invalidf("parts replace text and payload; give parts alone")
		}
		if parts, payload, err = s.parts(in); err != nil {
			return req, err
		}
		in.Identities = nil // checked against the parts; taken from them
		for _, p := range parts {
			in.Identities = append(in.Identities, p.Identity)
		}
	case len(in.Payload) > 0 && in.Text != "":
		return req, invalidf("text and payload are both set; give one")
	case len(in.Payload) > 0:
		payload, err = Canonical(in.Payload, s.MaxPayload)
	default:
		payload, err = textPayload(in.Text, s.MaxPayload)
	}
	if err != nil {
		return req, err
	}
	req = backend.AdmitRequest{
		ID:        backend.NewAdmissionID(s.now()),
		Session:   in.Session,
		Principal: in.Principal,
		Payload:   payload,
		Now:       s.now(),
	}
	if in.Producer == "" {
		// Human input: identified by (principal, request id), never by
		// producer identities, and always executed on the session's current
		// transcript.
		if len(in.Identities) > 0 {
			return backend.AdmitRequest{}, invalidf("identities need a producer (automation input)")
		}
		if in.Target != "" {
			return backend.AdmitRequest{}, invalidf("target needs a producer (automation input)")
		}
		if in.RequestID != "" {
			if err := backend.ValidateRequestID(in.RequestID); err != nil {
				return backend.AdmitRequest{}, err
			}
		}
		req.Kind = backend.KindHuman
		req.RequestID = in.RequestID
		req.CreateSession = true
		req.Reopen = in.Reopen
		return req, nil
	}
	if err := backend.ValidateProducer(in.Producer); err != nil {
		return backend.AdmitRequest{}, err
	}
	if in.RequestID != "" {
		return backend.AdmitRequest{}, invalidf("request id is for human input only (automation uses identities)")
	}
	if in.Reopen {
		return backend.AdmitRequest{}, invalidf("reopen is for human input only")
	}
	if len(in.Identities) == 0 {
		return backend.AdmitRequest{}, invalidf("identities are empty; automation input needs at least one")
	}
	if len(in.Identities) > backend.MaxIdentities {
		return backend.AdmitRequest{}, invalidf("offer has %d identities, more than %d", len(in.Identities), backend.MaxIdentities)
	}
	// A repeated identity in one offer names the same event twice; keep
	// the first so the store sees each identity once.
	ids := make([]string, 0, len(in.Identities))
	seen := map[string]bool{}
	for _, id := range in.Identities {
		if err := backend.ValidateToken("identity", id); err != nil {
			return backend.AdmitRequest{}, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if in.Target != "" {
		if err := backend.ValidateID("target", in.Target); err != nil {
			return backend.AdmitRequest{}, err
		}
	}
	req.Kind = backend.KindAutomation
	req.Producer = in.Producer
	req.Identities = ids
	req.Parts = parts
	req.PinnedTarget = in.Target
	return req, nil
}

// parts validates an offer's parts: each names a valid identity, once, and
// carries one of text or payload; identities, when given too, name the
// parts' identities in order. It returns the canonical parts and their
// composition, which must fit the payload limit, so any subset the store
// composes fits too.
func (s *Service) parts(in Input) ([]backend.Part, json.RawMessage, error) {
	if len(in.Parts) > backend.MaxIdentities {
		return nil, nil, invalidf("offer has %d parts, more than %d", len(in.Parts), backend.MaxIdentities)
	}
	if len(in.Identities) > 0 && len(in.Identities) != len(in.Parts) {
		return nil, nil, invalidf("%d identities for %d parts: leave identities out, or name each part's identity in order", len(in.Identities), len(in.Parts))
	}
	out := make([]backend.Part, len(in.Parts))
	seen := make(map[string]bool, len(in.Parts))
	for i, p := range in.Parts {
		if err := backend.ValidateToken(fmt.Sprintf("part %d identity", i+1), p.Identity); err != nil {
			return nil, nil, err
		}
		if len(in.Identities) > 0 && in.Identities[i] != p.Identity {
			return nil, nil, invalidf("part %d is for identity %q but identity %d is %q", i+1, p.Identity, i+1, in.Identities[i])
		}
		if seen[p.Identity] {
			return nil, nil, invalidf("identity %q has two parts", p.Identity)
		}
		seen[p.Identity] = true
		var payload json.RawMessage
		var err error
		switch {
		case len(p.Payload) > 0 && p.Text != "":
			return nil, nil, invalidf("part %d has both text and payload; give one", i+1)
		case len(p.Payload) > 0:
			payload, err = Canonical(p.Payload, s.MaxPayload)
		default:
			payload, err = textPayload(p.Text, s.MaxPayload)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("part %d: %w", i+1, err)
		}
		out[i] = backend.Part{Identity: p.Identity, Payload: payload}
	}
	all := backend.ComposeParts(out)
	limit, err := checkLimit(s.MaxPayload)
	if err != nil {
		return nil, nil, err
	}
	if len(all) > limit {
		return nil, nil, &GroupTooLargeError{Size: len(all), Limit: limit}
	}
	return out, all, nil
}
