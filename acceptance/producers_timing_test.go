package acceptance

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"testing"
)

// timingLine is the line producers run --timing prints for a plugin.
var timingLine = regexp.MustCompile(`(?m)^hermesq: producer delegation: timing: (\d+) events admitted in ([0-9.]+)s \((\d+)/s\), (\d+) polls: ` +
	`rpc ([0-9.]+)s ([0-9.]+)%, outbox ([0-9.]+)s ([0-9.]+)%, store ([0-9.]+)s ([0-9.]+)%, other ([0-9.]+)s ([0-9.]+)%$`)

// producers run --once --timing through the real delegation plugin prints
// one line for it: the events admitted, the run's time and its shares in
// rpc, outbox, store and other, which add up to the run's time.
func TestProducersRunTiming(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation")
		c.ok("session", "open", "s1")
		for i := range 5 {
			c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", fmt.Sprintf("D%d", i), "--result", "ok")
		}
		r := c.ok("producers", "run", "--once", "--timing")
		m := timingLine.FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("no timing line for the delegation plugin:\n%s", r.stderr)
		}
		if m[1] != "5" {
			t.Errorf("%s events admitted, want 5: %s", m[1], m[0])
		}
		if n, _ := strconv.Atoi(m[4]); n < 1 {
			t.Errorf("%d polls: %s", n, m[0])
		}
		f := func(i int) float64 {
			v, err := strconv.ParseFloat(m[i], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		wall, secs, shares := f(2), 0.0, 0.0
		for i := 5; i <= 11; i += 2 {
			secs += f(i)
			shares += f(i + 1)
		}
		if math.Abs(secs-wall) > 0.005 { // each of four rounded to the millisecond
			t.Errorf("the parts add up to %.3fs, the run took %.3fs: %s", secs, wall, m[0])
		}
		if math.Abs(shares-100) > 0.25 { // each of four rounded to 0.1%
			t.Errorf("the shares add up to %.1f%%: %s", shares, m[0])
		}
		if c.run(nil, "producers", "run", "--once").stderr != "" {
			t.Errorf("producers run without --timing printed on stderr")
		}
	})
}
