package producer

import (
	"fmt"
	"strings"
	"unicode/utf16"
)

// Identity returns an event identity made of parts, written as a compact
// JSON array of strings the way Python's json.dumps(parts,
// separators=(",", ":")) writes it (non-ASCII as \uXXXX escapes), so that
// identities match those of the original gateway byte for byte, e.g.
// Identity("async_delegation", "d1", "") is ["async_delegation","d1",""].
func Identity(parts ...string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, r := range p {
			switch r {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				switch {
				case r < 0x20 || (r >= 0x7f && r < 0x10000):
					fmt.Fprintf(&b, `\u%04x`, r)
				case r >= 0x10000:
					r1, r2 := utf16.EncodeRune(r)
					fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
				default:
					b.WriteRune(r)
				}
			}
		}
		b.WriteByte('"')
	}
	b.WriteByte(']')
	return b.String()
}

// PyFloat writes a number of seconds as Python's repr of a float does
// (1700000000.0, 1700000000.25): the started_at of process identities.
func PyFloat(f float64) string {
	return pyFloat(f)
}
