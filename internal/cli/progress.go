package cli

import (
	"fmt"
	"io"
	"time"
)

// progress counts records of long work (export, import) on stderr, only
// when stderr is a terminal and only once the work has run for a while:
// short work and scripts see nothing.
type progress struct {
	w     io.Writer
	on    bool
	verb  string
	after time.Duration // show nothing before this much time has passed
	every time.Duration // then redraw at most this often

	n     int
	start time.Time
	last  time.Time
	shown bool
}

func (f *Factory) progress(verb string) *progress {
	return &progress{w: f.IO.ErrOut, on: f.IO.IsStderrTTY(), verb: verb,
		after: time.Second, every: 200 * time.Millisecond, start: time.Now()}
}

// add counts k more records and redraws the line when due.
func (p *progress) add(k int) {
	p.n += k
	if !p.on {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < p.after || now.Sub(p.last) < p.every {
		return
	}
	p.last, p.shown = now, true
	fmt.Fprintf(p.w, "\rhermesq: %s %d records", p.verb, p.n)
}

// done ends the progress line, if one was drawn.
func (p *progress) done() {
	if p.shown {
		fmt.Fprintf(p.w, "\rhermesq: %s %d records\n", p.verb, p.n)
		p.shown = false
	}
}
