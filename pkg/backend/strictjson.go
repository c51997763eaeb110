package backend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxJSONNesting bounds how deep a strictly checked JSON value may nest, so
// a hostile line cannot make a parser recurse without end.
const MaxJSONNesting = 1000

// CheckJSON checks that b is exactly one JSON value, parsed strictly: valid
// UTF-8 (no byte-order mark, no lone surrogate escape such as \ud800), no
// object with a duplicate key, nothing but white space after the value, and
// nested at most MaxJSONNesting deep. encoding/json repairs or guesses in
// each of these cases (invalid bytes become U+FFFD, the last repeated key
// wins); hermesq refuses them instead, so what is stored is what was sent.
// The error (wrapping ErrInvalid) names the problem and its byte offset.
func CheckJSON(b []byte) error {
	_, err := checkJSON(b, false)
	return err
}

// checkJSON is CheckJSON; with members, when b is an object, it also
// returns the object's members (nil for any other value).
func checkJSON(b []byte, members bool) (map[string]json.RawMessage, error) {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return nil, fmt.Errorf("byte-order mark not allowed: %w", ErrInvalid)
	}
	sc := &jsonScanner{b: b, members: members}
	sc.space()
	if err := sc.value(0); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	sc.space()
	if sc.i < len(b) {
		return nil, fmt.Errorf("data after the JSON value: %s: %w", sc.what(), ErrInvalid)
	}
	return sc.top, nil
}

// StrictObject checks b with CheckJSON, requires a JSON object whose keys
// are all among allowed (spelled exactly: "Text" is not "text"), and
// returns its members. what names the object in errors ("input line").
//
// The members are collected while b is checked, in one pass: what
// json.Unmarshal into a map[string]json.RawMessage would give for an
// object CheckJSON accepts (each key unquoted, each value's exact bytes),
// as FuzzStrictObject holds it to.
func StrictObject(b []byte, what string, allowed ...string) (map[string]json.RawMessage, error) {
	// The members are slices of one copy of b: the caller may reuse b (a
	// line read into a reader's buffer).
	m, err := checkJSON(bytes.Clone(b), true)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("%s is not a JSON object: %w", what, ErrInvalid)
	}
	return m, CheckFields(m, what, allowed...)
}

// CheckFields refuses a member of m whose name is not one of allowed,
// exactly; a name that differs only in case is named as such.
func CheckFields(m map[string]json.RawMessage, what string, allowed ...string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		known := false
		for _, a := range allowed {
			if k == a {
				known = true
				break
			}
		}
		if known {
			continue
		}
		for _, a := range allowed {
			if strings.EqualFold(k, a) {
				return fmt.Errorf("%s: field %s is spelled %q (field names are case-sensitive): %w", what, strconv.Quote(k), a, ErrInvalid)
			}
		}
		return fmt.Errorf("%s: unknown field %s (want %s): %w", what, strconv.Quote(k), strings.Join(allowed, ", "), ErrInvalid)
	}
	return nil
}

// jsonScanner is a strict recursive-descent JSON checker over b.
type jsonScanner struct {
	b []byte
	i int
	// members: collect the top-level object's members into top.
	members bool
	top     map[string]json.RawMessage
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// what describes the byte at s.i for an error: the character, named as a
// code point when it is not printable ASCII.
func (s *jsonScanner) what() string {
	if s.i >= len(s.b) {
		return "unexpected end of input"
	}
	c := s.b[s.i]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("unexpected %q at byte %d", c, s.i)
	}
	r, size := utf8.DecodeRune(s.b[s.i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("invalid UTF-8 byte 0x%02x at byte %d", c, s.i)
	}
	if r == 0xFEFF {
		return fmt.Sprintf("byte-order mark not allowed (at byte %d)", s.i)
	}
	return fmt.Sprintf("unexpected %U at byte %d", r, s.i)
}

func (s *jsonScanner) value(depth int) error {
	if depth > MaxJSONNesting {
		return fmt.Errorf("nested deeper than %d levels at byte %d", MaxJSONNesting, s.i)
	}
	if s.i >= len(s.b) {
		return fmt.Errorf("unexpected end of input")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, err := s.scanStr(false)
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return fmt.Errorf("%s", s.what())
}

func (s *jsonScanner) object(depth int) error {
	s.i++ // {
	// seen holds the keys read so far; the top-level object whose members
	// are collected finds them in top instead.
	var seen map[string]bool
	var top map[string]json.RawMessage
	if depth == 0 && s.members {
		top = map[string]json.RawMessage{}
		s.top = top
	} else {
		seen = map[string]bool{}
	}
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return fmt.Errorf("%s, want an object key", s.what())
		}
		at := s.i
		k, err := s.str()
		if err != nil {
			return err
		}
		if _, dup := top[k]; dup || seen[k] {
			return fmt.Errorf("duplicate key %s at byte %d", strconv.Quote(k), at)
		}
		if seen != nil {
			seen[k] = true
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return fmt.Errorf("%s, want ':'", s.what())
		}
		s.i++
		s.space()
		start := s.i
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if top != nil {
			top[k] = json.RawMessage(s.b[start:s.i:s.i])
		}
		s.space()
		if s.i >= len(s.b) {
			return fmt.Errorf("unexpected end of input in an object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return fmt.Errorf("%s, want ',' or '}'", s.what())
		}
	}
}

func (s *jsonScanner) array(depth int) error {
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return fmt.Errorf("unexpected end of input in an array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return fmt.Errorf("%s, want ',' or ']'", s.what())
		}
	}
}

func (s *jsonScanner) literal(word string) error {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return nil
	}
	return fmt.Errorf("%s", s.what())
}

func (s *jsonScanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *jsonScanner) number() error {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return fmt.Errorf("bad number at byte %d", start)
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return fmt.Errorf("bad number at byte %d", start)
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return fmt.Errorf("bad number at byte %d", start)
		}
	}
	return nil
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// hex4 reads the four hex digits of a \u escape at s.i.
func (s *jsonScanner) hex4() (rune, error) {
	if len(s.b)-s.i < 4 {
		return 0, fmt.Errorf("short \\u escape at byte %d", s.i)
	}
	var r rune
	for k := 0; k < 4; k++ {
		v, ok := hexVal(s.b[s.i+k])
		if !ok {
			return 0, fmt.Errorf("bad \\u escape at byte %d", s.i)
		}
		r = r<<4 | v
	}
	s.i += 4
	return r, nil
}

// str reads a string at s.i (on its opening quote) and returns its value.
func (s *jsonScanner) str() (string, error) { return s.scanStr(true) }

// scanStr reads a string at s.i, returning its value when keep is set. A
// run of printable ASCII with no escape, as most strings are, is read
// without decoding; the rest of a string from its first other byte is
// decoded, and checked, one character at a time.
func (s *jsonScanner) scanStr(keep bool) (string, error) {
	s.i++ // "
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			s.i++
			if !keep {
				return "", nil
			}
			return string(s.b[start : s.i-1]), nil
		}
		if c < 0x20 || c == '\\' || c >= 0x80 {
			break
		}
		s.i++
	}
	var sb strings.Builder
	if keep {
		sb.Write(s.b[start:s.i])
	}
	for {
		if s.i >= len(s.b) {
			return "", fmt.Errorf("unterminated string")
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return sb.String(), nil
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return "", fmt.Errorf("unterminated string")
			}
			e := s.b[s.i]
			s.i++
			switch e {
			case '"', '\\', '/':
				sb.WriteByte(e)
			case 'b':
				sb.WriteByte('\b')
			case 'f':
				sb.WriteByte('\f')
			case 'n':
				sb.WriteByte('\n')
			case 'r':
				sb.WriteByte('\r')
			case 't':
				sb.WriteByte('\t')
			case 'u':
				at := s.i - 2
				r, err := s.hex4()
				if err != nil {
					return "", err
				}
				switch {
				case r >= 0xD800 && r < 0xDC00:
					if len(s.b)-s.i < 6 || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
						return "", fmt.Errorf("lone surrogate escape \\u%04x at byte %d (not valid unicode)", r, at)
					}
					s.i += 2
					lo, err := s.hex4()
					if err != nil {
						return "", err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return "", fmt.Errorf("lone surrogate escape \\u%04x at byte %d (not valid unicode)", r, at)
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				case r >= 0xDC00 && r <= 0xDFFF:
					return "", fmt.Errorf("lone surrogate escape \\u%04x at byte %d (not valid unicode)", r, at)
				}
				sb.WriteRune(r)
			default:
				return "", fmt.Errorf("bad escape %q at byte %d", []byte{'\\', e}, s.i-2)
			}
		case c < 0x20:
			return "", fmt.Errorf("raw control character 0x%02x in a string at byte %d (escape it)", c, s.i)
		case c < 0x80:
			sb.WriteByte(c)
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", fmt.Errorf("invalid UTF-8 byte 0x%02x at byte %d", c, s.i)
			}
			sb.WriteString(string(s.b[s.i : s.i+size]))
			s.i += size
		}
	}
}
