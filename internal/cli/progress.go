package cli

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress counts records of long work (export, import) on stderr, only
// when stderr is a terminal and only once the work has run for a while:
// short work and scripts see nothing. Drawing is progressbar's.
type progress struct {
	w     io.Writer
	on    bool
	verb  string
	after time.Duration // show nothing before this much time has passed
	start time.Time

	n   int64
	bar *progressbar.ProgressBar
}

func (f *Factory) progress(verb string) *progress {
	return &progress{w: f.IO.ErrOut, on: f.IO.IsStderrTTY(), verb: verb, after: time.Second, start: time.Now()}
}

// add counts k more records and redraws the line when due.
func (p *progress) add(k int) {
	p.n += int64(k)
	if !p.on {
		return
	}
	if p.bar == nil {
		if time.Since(p.start) < p.after {
			return
		}
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("hermesq: "+p.verb),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(p.w, "\n") }),
		)
		_ = p.bar.Set64(p.n)
		return
	}
	_ = p.bar.Add(k)
}

// done ends the progress line, if one was drawn.
func (p *progress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}
