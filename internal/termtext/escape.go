package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Escape makes stored text safe to print on an operator's terminal:
// every control character (C0 such as ESC, BEL and CR, DEL, C1 such as
// CSI U+009B) and every bidirectional formatting character (U+202E…) is
// written as an escape (\e, \a, \r, \u202e…), as are bytes that are not
// UTF-8 (\xff), and the backslash itself (\\), so the escapes cannot be
// forged. With keepLines, newlines and tabs are kept as they are (message
// contents read as written); otherwise they are escaped (\n, \t) so a
// value stays on its line.
func Escape(s string, keepLines bool) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '\\' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case (r == '\n' || r == '\t') && keepLines:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == 0x1b:
			b.WriteString(`\e`)
		case r == 0x07:
			b.WriteString(`\a`)
		case unicode.IsControl(r), backend.IsBidiControl(r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Esc escapes a one-line value (Escape without keepLines).
func Esc(s string) string { return Escape(s, false) }
