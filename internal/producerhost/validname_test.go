package producerhost

import (
	"regexp"
	"strings"
	"testing"
)

// nameRE is the language ValidName decides, as a regular expression.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

func TestValidNameTable(t *testing.T) {
	for _, name := range []string{
		"", "a", "0", "_", "-", "a_", "a-", "_a", "-a", "ab-c_d9", "A", "aB", "a.b", "a b", "a/b",
		"a\n", "\na", "é", "aé", "a\x00", strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("a", 65), "a" + strings.Repeat("-", 63), "a" + strings.Repeat("_", 64),
		"delegation", "process", "watch", "hermesq-producer-x", "x.exe", "0-0", "z9_",
	} {
		if got, want := ValidName(name), nameRE.MatchString(name); got != want {
			t.Errorf("ValidName(%q) = %v, the expression says %v", name, got, want)
		}
	}
}

// TestValidNameShortStrings compares ValidName with the expression on
// every string of up to three bytes over an alphabet holding each class of
// byte the language tells apart, and on each length around the limit.
func TestValidNameShortStrings(t *testing.T) {
	alphabet := []byte{'a', 'z', '0', '9', '_', '-', 'A', 'Z', '.', '/', ' ', '`', '{', '@', '[', ':', 0, 0x80, 0xff}
	var check func(prefix []byte, depth int)
	check = func(prefix []byte, depth int) {
		s := string(prefix)
		if got, want := ValidName(s), nameRE.MatchString(s); got != want {
			t.Fatalf("ValidName(%q) = %v, the expression says %v", s, got, want)
		}
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			check(append(prefix, c), depth-1)
		}
	}
	check(nil, 3)
	for n := 60; n <= 70; n++ {
		for _, tail := range []string{"", "-", "A"} {
			s := strings.Repeat("a", n) + tail
			if got, want := ValidName(s), nameRE.MatchString(s); got != want {
				t.Fatalf("ValidName(%d bytes ending %q) = %v, the expression says %v", len(s), tail, got, want)
			}
		}
	}
}

func FuzzValidName(f *testing.F) {
	for _, s := range []string{"", "a", "a-b_c", "-a", strings.Repeat("a", 64), strings.Repeat("a", 65), "aé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), nameRE.MatchString(s); got != want {
			t.Fatalf("ValidName(%q) = %v, the expression says %v", s, got, want)
		}
	})
}
