package termtext

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Table writes aligned columns, every cell escaped (Escape): stored
// text never reaches the terminal raw.
func Table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = Esc(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Cell makes a value fit on one line of a table: cut to max runes on a
// terminal (max 0: never cut). Table escapes it.
func Cell(s string, max int) string {
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// OrDash is s, or "-" for an empty s.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// OneLine keeps a message on one line.
func OneLine(s string) string {
	s = strings.TrimRight(s, "\r\n")
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
