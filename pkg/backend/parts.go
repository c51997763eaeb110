package backend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Part is one identity's own share of an automation offer: a group offer
// may carry a part per identity, so that the admission made of the
// identities not yet held holds their parts alone, and every producer
// result is noted exactly once however the producer regroups its re-offers.
type Part struct {
	Identity string
	Payload  json.RawMessage // canonical JSON object with a non-empty "text"
}

// ComposeParts is the payload of an admission made of parts, in offer
// order. One part is its own payload, unchanged. Several are the canonical
// object
//
//	{"parts":[{"identity":ID,"payload":P},…],"text":T}
//
// where T joins the parts' texts with a newline, so that a note or a turn
// of the group reads every member's text once. Every store composes with
// this one rule (the Redis store builds the same bytes inside its script),
// so a payload never depends on the store it was admitted to.
func ComposeParts(parts []Part) json.RawMessage {
	if len(parts) == 1 {
		return append(json.RawMessage(nil), parts[0].Payload...)
	}
	var members, texts bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			members.WriteByte(',')
			texts.WriteString(`\n`)
		}
		members.Write(PartMember(p))
		texts.Write(PartTextFragment(p.Payload))
	}
	var b bytes.Buffer
	b.Grow(members.Len() + texts.Len() + 24)
	b.WriteString(`{"parts":[`)
	b.Write(members.Bytes())
	b.WriteString(`],"text":"`)
	b.Write(texts.Bytes())
	b.WriteString(`"}`)
	return b.Bytes()
}

// PartMember is one part as a member of a composed payload's "parts":
// {"identity":ID,"payload":P}, canonical.
func PartMember(p Part) []byte {
	var b bytes.Buffer
	b.WriteString(`{"identity":`)
	b.Write(AppendJSONString(nil, p.Identity))
	b.WriteString(`,"payload":`)
	b.Write(p.Payload)
	b.WriteByte('}')
	return b.Bytes()
}

// PartTextFragment is the "text" of a canonical payload as it stands
// between the quotes of a JSON string (escaped as canonical form escapes):
// the piece a composed payload's text is joined from.
func PartTextFragment(payload json.RawMessage) []byte {
	var v struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(payload, &v) // canonical payloads always have a string text
	s := AppendJSONString(nil, v.Text)
	return s[1 : len(s)-1]
}

// PartOf returns the part identity contributed to a committed admission
// with the given payload and identities: the whole payload when the
// admission carries that identity alone, the member's payload when the
// admission was composed of parts, and false when the admission carries a
// group payload not made of parts (no member has a part of its own).
func PartOf(payload json.RawMessage, identities []string, identity string) (json.RawMessage, bool) {
	if len(identities) == 1 && identities[0] == identity {
		return payload, true
	}
	var v struct {
		Parts []struct {
			Identity string          `json:"identity"`
			Payload  json.RawMessage `json:"payload"`
		} `json:"parts"`
	}
	if json.Unmarshal(payload, &v) != nil {
		return nil, false
	}
	for _, p := range v.Parts {
		if p.Identity == identity {
			return p.Payload, true
		}
	}
	return nil, false
}

// PartDiffers reports whether an offered part differs from what its
// identity committed in the admission holding it (payload and identities of
// that admission): payload_differs judged per member. A member of a group
// committed without parts differs unless the group's payload is the part.
//
// A tombstone (Compacted) keeps only its payload's digest: a part is
// judged against it as the whole payload, which is exact when the
// admission was made of that one part or of an offer without parts.
func PartDiffers(offered json.RawMessage, held Admission, identity string) bool {
	if held.Compacted {
		return PayloadDigest(offered) != held.PayloadSHA1
	}
	committed, ok := PartOf(held.Payload, held.Identities, identity)
	if !ok {
		return !bytes.Equal(held.Payload, offered)
	}
	return !bytes.Equal(committed, offered)
}

// AppendJSONString appends s quoted as canonical JSON writes strings: only
// the escapes JSON requires (the quote, the backslash and control
// characters); everything else stays UTF-8 as it is.
func AppendJSONString(b []byte, s string) []byte { return appendQuoted(b, s, quoteCanonical) }

// AppendEncoderString appends s quoted exactly as an encoding/json Encoder
// with SetEscapeHTML(false) writes a string: as json.Marshal does, but
// leaving <, > and & as they are.
func AppendEncoderString(b []byte, s string) []byte { return appendQuoted(b, s, quoteNoHTML) }

// plainBytes[mode][c] is whether appendQuoted in mode copies the byte c
// as it is, whatever comes around it: a byte of a string is looked at
// once, by one load. The bytes of UTF-8 sequences are plain only in
// quoteCanonical; the other modes decode the rune.
var plainBytes = func() (t [3][256]bool) {
	for mode := range t {
		for c := range t[mode] {
			t[mode][c] = c >= 0x20 && c != '"' && c != '\\' &&
				(c < utf8.RuneSelf || quoteMode(mode) == quoteCanonical) &&
				(quoteMode(mode) != quoteMarshal || c != '<' && c != '>' && c != '&')
		}
	}
	return t
}()

// load64 is the 8 bytes of w as a little-endian word (encoding/binary
// reads byte slices, and making one of a string would copy it).
func load64(w string) uint64 {
	_ = w[7]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// plainWord reports whether every byte of the word x is plain ASCII that
// appendQuoted copies as it is in every mode: none below 0x20 or from 0x80
// up, none a quote or a backslash. A string is mostly such words, each
// checked at once instead of byte by byte; a word that is not goes byte by
// byte.
func plainWord(x uint64) bool {
	return (x|(x-ones*0x20)&^x|zeroByte(x^ones*'"')|zeroByte(x^ones*'\\'))&highs == 0
}

// plainWordHTML reports whether the word x holds none of <, > and &, which
// quoteMarshal escapes.
func plainWordHTML(x uint64) bool {
	return (zeroByte(x^ones*'<')|zeroByte(x^ones*'>')|zeroByte(x^ones*'&'))&highs == 0
}

// zeroByte has the high bit of some byte set if a byte of v is zero (and
// never when none is).
func zeroByte(v uint64) uint64 { return (v - ones) &^ v }

// quoteMode is how appendQuoted writes a string.
type quoteMode uint8

const (
	// quoteCanonical: only the escapes JSON requires.
	quoteCanonical quoteMode = iota
	// quoteMarshal: what json.Marshal writes.
	quoteMarshal
	// quoteNoHTML: what an encoding/json Encoder without HTML escaping
	// writes.
	quoteNoHTML
)

// appendQuoted appends s between quotes, escaping the quote, the backslash
// and control characters (\b \f \n \r \t, else \u00XX). Except in
// quoteCanonical it writes, as encoding/json does, U+2028 and U+2029 as
// \u2028 \u2029 and each byte that is not UTF-8 as \ufffd; in
// quoteMarshal also <, > and & as \u003c \u003e \u0026.
func appendQuoted(b []byte, s string, mode quoteMode) []byte {
	const hex = "0123456789abcdef"
	plain := &plainBytes[mode]
	marshal := mode == quoteMarshal
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Whole words of plain ASCII first, 8 bytes at once.
		for i+8 <= len(s) {
			x := load64(s[i : i+8])
			if marshal && !plainWordHTML(x) || !plainWord(x) {
				break
			}
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(append(b, s[start:i]...), `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
			default:
				i += size
				continue
			}
			i += size
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// checkParts checks the parts of an automation request: each with a valid
// identity and a payload, no identity twice, and Identities naming the
// parts' identities in order.
func checkParts(r AdmitRequest) error {
	if len(r.Parts) != len(r.Identities) {
		return fmt.Errorf("%d parts for %d identities: %w", len(r.Parts), len(r.Identities), ErrInvalid)
	}
	seen := make(map[string]bool, len(r.Parts))
	for i, p := range r.Parts {
		if p.Identity != r.Identities[i] {
			return fmt.Errorf("part %d is for identity %q, not %q: %w", i+1, p.Identity, r.Identities[i], ErrInvalid)
		}
		if seen[p.Identity] {
			return fmt.Errorf("identity %q has two parts: %w", p.Identity, ErrInvalid)
		}
		seen[p.Identity] = true
		if len(p.Payload) == 0 {
			return fmt.Errorf("part %d has an empty payload: %w", i+1, ErrInvalid)
		}
	}
	return nil
}
