package cli

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeString decodes v, one JSON value, into *dst as encoding/json's
// Unmarshal does. A string that needs no decoding (plainString), as nearly
// every one in a batch is, is its bytes between the quotes; any other value
// goes to encoding/json, which also replaces invalid UTF-8 with U+FFFD.
// FuzzDecodeStrings holds both to encoding/json.
func decodeString(v []byte, dst *string) error {
	if s, ok := plainString(v); ok {
		*dst = string(s)
		return nil
	}
	return json.Unmarshal(v, dst)
}

// decodeStrings decodes v, one JSON value, into *dst as encoding/json's
// Unmarshal does, taking a list of strings that need no decoding without
// it.
func decodeStrings(v []byte, dst *[]string) error {
	if ss, ok := plainStrings(v); ok {
		*dst = ss
		return nil
	}
	return json.Unmarshal(v, dst)
}

// plainString returns the text of v when v is exactly one JSON string
// with no escape, no control character and valid UTF-8: the bytes between
// its quotes are then its value.
func plainString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	end := plainEnd(v, 1)
	if end != len(v)-1 {
		return nil, false
	}
	return v[1:end], true
}

// plainEnd returns the index of the quote closing the string whose text
// starts at v[i], or -1 when that text is not plain (see plainString).
func plainEnd(v []byte, i int) int {
	for j := i; j < len(v); j++ {
		switch c := v[j]; {
		case c == '"':
			if !utf8.Valid(v[i:j]) {
				return -1
			}
			return j
		case c < 0x20 || c == '\\':
			return -1
		}
	}
	return -1
}

// plainStrings returns the strings of v when v is a JSON list of plain
// strings (plainString), with JSON's white space anywhere between tokens.
// An empty list is an empty, non-nil slice, as encoding/json makes it.
func plainStrings(v []byte) ([]string, bool) {
	i := skipSpace(v, 0)
	if i == len(v) || v[i] != '[' {
		return nil, false
	}
	out := []string{}
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return out, skipSpace(v, i+1) == len(v)
	}
	for {
		if i == len(v) || v[i] != '"' {
			return nil, false
		}
		end := plainEnd(v, i+1)
		if end < 0 {
			return nil, false
		}
		out = append(out, string(v[i+1:end]))
		i = skipSpace(v, end+1)
		switch {
		case i == len(v):
			return nil, false
		case v[i] == ']':
			return out, skipSpace(v, i+1) == len(v)
		case v[i] != ',':
			return nil, false
		}
		i = skipSpace(v, i+1)
	}
}

// skipSpace returns the index of the first byte from i on that is not
// JSON white space.
func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}
