package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
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
}

// maxNesting bounds how deep a payload may nest, so a hostile payload cannot
// make canonicalisation recurse without end.
const maxNesting = 1000

// maxRawPayload bounds the bytes parsed before the canonical size is known:
// whitespace and escapes may shrink a payload, but not by more than this.
const maxRawPayload = 4 * MaxPayloadLimit

func invalidf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, backend.ErrInvalid)...)
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

// writeString quotes s with only the escapes JSON requires: the quote, the
// backslash and control characters. Everything else stays UTF-8.
func writeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			buf.WriteString(`\"`)
		case c == '\\':
			buf.WriteString(`\\`)
		case c == '\n':
			buf.WriteString(`\n`)
		case c == '\r':
			buf.WriteString(`\r`)
		case c == '\t':
			buf.WriteString(`\t`)
		case c == '\b':
			buf.WriteString(`\b`)
		case c == '\f':
			buf.WriteString(`\f`)
		case c < 0x20:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		default:
			buf.WriteByte(c)
		}
	}
	buf.WriteByte('"')
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
	if err := backend.ValidateToken("principal", in.Principal); err != nil {
		return req, err
	}
	var payload json.RawMessage
	var err error
	switch {
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
		ID:        NewID(),
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
			if err := backend.ValidateToken("request id", in.RequestID); err != nil {
				return backend.AdmitRequest{}, err
			}
		}
		req.Kind = backend.KindHuman
		req.RequestID = in.RequestID
		req.CreateSession = true
		req.Reopen = in.Reopen
		return req, nil
	}
	if err := backend.ValidateToken("producer", in.Producer); err != nil {
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
	req.PinnedTarget = in.Target
	return req, nil
}
