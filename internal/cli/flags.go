package cli

import (
	"github.com/hermesq/hermesq/pkg/backend"
	"slices"
	"strings"
	"time"
)

// enumFlag parses the values of a list flag, each one of allowed; set says
// whether the flag was given at all.
func enumFlag[T ~string](name string, set bool, values []string, allowed ...T) ([]T, error) {
	words := make([]string, len(allowed))
	for i, a := range allowed {
		words[i] = string(a)
	}
	want := strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
	if set && len(values) == 0 {
		return nil, backend.Errorf(backend.ErrInvalid, "--%s is empty: want %s", name, want)
	}
	var out []T
	for _, v := range values {
		v = strings.TrimSpace(v)
		if !slices.Contains(words, v) {
			return nil, backend.Errorf(backend.ErrInvalid, "%s %q: want %s", name, v, want)
		}
		out = append(out, T(v))
	}
	return out, nil
}

// parseSince reads a --since value: a positive duration back from now, or
// an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, backend.Errorf(backend.ErrInvalid, "--since %s: want a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, backend.Errorf(backend.ErrInvalid, "--since %q: want a duration (24h) or an RFC 3339 time", s)
	}
	return t, nil
}
