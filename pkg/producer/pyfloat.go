package producer

import (
	"math"
	"strconv"
	"strings"
)

// pyFloat is Python's repr(float): the shortest digits that read back as
// f; positional between 1e-4 and 1e16, else scientific with a two-digit
// exponent at least; always with a '.' or an exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64) // 1e+16, 1.5e-05
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}
