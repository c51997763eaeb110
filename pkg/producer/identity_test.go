package producer_test

import (
	"testing"

	"github.com/hermesq/hermesq/pkg/producer"
)

func TestIdentityIsPythonsCompactJSON(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"async_delegation", "d1", ""}, `["async_delegation","d1",""]`},
		{[]string{"completion", "proc_1", "1700000000.0"}, `["completion","proc_1","1700000000.0"]`},
		{[]string{`a"b\c`, "x\ny", "<&>"}, `["a\"b\\c","x\ny","<&>"]`},
		{[]string{"é", "😀", "\x01"}, `["\u00e9","\ud83d\ude00","\u0001"]`},
	} {
		if got := producer.Identity(c.parts...); got != c.want {
			t.Errorf("Identity(%q) = %s, want %s", c.parts, got, c.want)
		}
	}
}

func TestPyFloatIsPythonsRepr(t *testing.T) {
	for f, want := range map[float64]string{
		1700000000:        "1700000000.0",
		1700000000.25:     "1700000000.25",
		1700000000.123456: "1700000000.123456",
		0:                 "0.0",
		0.1:               "0.1",
		1e16:              "1e+16",
		1.5e-05:           "1.5e-05",
		123456789012345:   "123456789012345.0",
	} {
		if got := producer.PyFloat(f); got != want {
			t.Errorf("PyFloat(%v) = %s, want %s", f, got, want)
		}
	}
}
