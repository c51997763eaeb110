// Package recjson reads the compact JSON records a program writes itself
// without a reflecting decoder, or says it cannot: a Reader reads what it
// fully understands (no whitespace, no key that is not the record's own or
// one seen twice, numbers of plain digits, strings of valid UTF-8 without
// \u escapes) and fails on anything else, for the caller to hand the bytes
// to its JSON decoder instead. A reflecting decoder builds its tables for
// each type the first time it meets it and reads every field through them;
// records read on every operation (the bbolt store's sessions and
// admissions, a producer's outbox entries) are read several times faster
// this way. Its callers' fuzz targets hold what it reads to encoding/json.
package recjson

import (
	"bytes"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxDepth bounds the nesting of a value read whole (Raw); deeper values
// fail.
const maxDepth = 64

// Reader reads one compact JSON value. Once it fails, every read returns a
// zero value and Done reports false.
type Reader struct {
	b    []byte
	i    int
	fail bool
}

// New returns a Reader of b.
func New(b []byte) Reader { return Reader{b: b} }

// Done reports whether the value was read whole, with nothing after it.
func (r *Reader) Done() bool { return !r.fail && r.i == len(r.b) }

// Failed reports whether a read failed.
func (r *Reader) Failed() bool { return r.fail }

// Fail makes the read fail (a value the caller does not take).
func (r *Reader) Fail() { r.fail = true }

func (r *Reader) next(c byte) bool {
	if !r.fail && r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *Reader) expect(c byte) bool {
	if !r.next(c) {
		r.fail = true
		return false
	}
	return true
}

// Object reads an object whose keys are among keys (at most 64), each at
// most once, handing each key to value, which reads the member's value.
func (r *Reader) Object(keys []string, value func(key string)) {
	if len(keys) > 64 {
		r.fail = true
		return
	}
	if !r.expect('{') || r.next('}') {
		return
	}
	var seen uint64
	for !r.fail {
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			break
		}
		j := r.i + 1
		for j < len(r.b) && r.b[j] != '"' {
			j++
		}
		if j+1 >= len(r.b) || r.b[j+1] != ':' {
			break
		}
		k := keyIndex(keys, r.b[r.i+1:j])
		if k < 0 || seen&(1<<k) != 0 {
			break
		}
		seen |= 1 << k
		r.i = j + 2
		value(keys[k])
		if r.next(',') {
			continue
		}
		if r.next('}') {
			return
		}
		break
	}
	r.fail = true
}

// keyIndex is the index of key in keys, -1 when it is not one of them.
func keyIndex(keys []string, key []byte) int {
	for i, k := range keys {
		if k == string(key) {
			return i
		}
	}
	return -1
}

// Elements reads an array, handing each element to elem, which reads it.
func (r *Reader) Elements(elem func()) {
	if !r.expect('[') || r.next(']') {
		return
	}
	for !r.fail {
		elem()
		if r.next(',') {
			continue
		}
		if r.next(']') {
			return
		}
		break
	}
	r.fail = true
}

// Null reads a null if one is next.
func (r *Reader) Null() bool {
	if !r.fail && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// Str reads a string: bytes below 0x20 and escapes other than \" \\ \/
// \b \f \n \r \t fail, and so does invalid UTF-8 (encoding/json would
// replace it).
func (r *Reader) Str() string {
	if r.fail || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.fail = true
		return ""
	}
	start := r.i + 1
	j := start
	for j < len(r.b) && r.b[j] >= 0x20 && r.b[j] != '"' && r.b[j] != '\\' {
		j++
	}
	if j < len(r.b) && r.b[j] == '"' {
		s := r.b[start:j]
		if !utf8.Valid(s) {
			r.fail = true
			return ""
		}
		r.i = j + 1
		return string(s)
	}
	out := append(make([]byte, 0, j-start+16), r.b[start:j]...)
	for j < len(r.b) {
		c := r.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				r.fail = true
				return ""
			}
			r.i = j + 1
			return string(out)
		case c < 0x20:
			r.fail = true
			return ""
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(r.b) {
			break
		}
		switch e := r.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			r.fail = true
			return ""
		}
		j += 2
	}
	r.fail = true
	return ""
}

// Strs reads an array of strings ([] is an empty slice, not nil).
func (r *Reader) Strs() []string {
	out := []string{}
	r.Elements(func() { out = append(out, r.Str()) })
	if r.fail {
		return nil
	}
	return out
}

// Uint reads a number of plain digits, without leading zeros, that fits
// max.
func (r *Reader) Uint(max uint64) uint64 {
	if r.fail {
		return 0
	}
	j := r.i
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	if j == r.i || r.b[r.i] == '0' && j > r.i+1 {
		r.fail = true
		return 0
	}
	n, err := strconv.ParseUint(string(r.b[r.i:j]), 10, 64)
	if err != nil || n > max {
		r.fail = true
		return 0
	}
	r.i = j
	return n
}

// Int reads a non-negative int as Uint does.
func (r *Reader) Int() int { return int(r.Uint(math.MaxInt)) }

// Time reads a time as its UnmarshalJSON does, from a string without
// escapes.
func (r *Reader) Time() time.Time {
	if r.fail || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.fail = true
		return time.Time{}
	}
	j := r.i + 1
	for j < len(r.b) && r.b[j] != '"' && r.b[j] != '\\' {
		j++
	}
	var t time.Time
	if j >= len(r.b) || r.b[j] != '"' || t.UnmarshalJSON(r.b[r.i:j+1]) != nil {
		r.fail = true
		return time.Time{}
	}
	r.i = j + 1
	return t
}

// Raw reads any value whole and returns a copy of its bytes: objects and
// arrays nested at most 64 deep, strings of valid UTF-8 with any JSON
// escape, numbers in JSON's grammar, true, false and null. Keys are not
// looked at: a key may come twice.
func (r *Reader) Raw() []byte {
	start := r.i
	r.skip(0)
	if r.fail {
		return nil
	}
	return bytes.Clone(r.b[start:r.i])
}

func (r *Reader) skip(depth int) {
	if r.fail || r.i >= len(r.b) {
		r.fail = true
		return
	}
	switch c := r.b[r.i]; {
	case c == '{':
		if depth >= maxDepth {
			break
		}
		r.i++
		if r.next('}') {
			return
		}
		for !r.fail {
			r.skipString()
			if !r.expect(':') {
				return
			}
			r.skip(depth + 1)
			if r.next(',') {
				continue
			}
			if r.next('}') {
				return
			}
			break
		}
	case c == '[':
		if depth >= maxDepth {
			break
		}
		r.i++
		if r.next(']') {
			return
		}
		for !r.fail {
			r.skip(depth + 1)
			if r.next(',') {
				continue
			}
			if r.next(']') {
				return
			}
			break
		}
	case c == '"':
		r.skipString()
		return
	case c == '-' || c >= '0' && c <= '9':
		r.skipNumber()
		return
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(r.b[r.i:], []byte(lit)) {
				r.i += len(lit)
				return
			}
		}
	}
	r.fail = true
}

// skipString reads a string of valid UTF-8 with any JSON escape.
func (r *Reader) skipString() {
	if !r.expect('"') {
		return
	}
	start := r.i
	for j := r.i; j < len(r.b); {
		c := r.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(r.b[start:j]) {
				r.fail = true
				return
			}
			r.i = j + 1
			return
		case c < 0x20:
			r.fail = true
			return
		case c != '\\':
			j++
			continue
		}
		// An escape.
		if j+1 < len(r.b) && bytes.IndexByte([]byte(`"\/bfnrt`), r.b[j+1]) >= 0 {
			j += 2
			continue
		}
		if j+6 > len(r.b) || r.b[j+1] != 'u' || !isHex4(r.b[j+2:j+6]) {
			break
		}
		j += 6
	}
	r.fail = true
}

func isHex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// skipNumber reads a number in JSON's grammar.
func (r *Reader) skipNumber() {
	b, j := r.b, r.i
	digits := func() bool {
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case !digits():
		r.fail = true
		return
	}
	if j < len(b) && b[j] == '.' {
		j++
		if !digits() {
			r.fail = true
			return
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !digits() {
			r.fail = true
			return
		}
	}
	r.i = j
}
