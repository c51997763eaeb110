package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// batchLine is one --batch input line: the input, or why it is bad.
type batchLine struct {
	n   int
	in  admission.Input
	err error
}

// batchError is the result printed for a bad --batch line.
type batchError struct {
	Line    int    `json:"line"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

// A --batch is read, committed and printed in chunks of at most
// batchChunkLines lines or batchChunkBytes bytes of input (a longer line is
// a chunk of its own), so memory stays bounded whatever the batch size and
// results appear while the batch runs. Each chunk is one store call.
const (
	batchChunkLines = 1024
	batchChunkBytes = 1 << 20
	// batchMemoryLimit is the soft heap limit of a batch (runtime/debug).
	// At 32 MiB a 100,000-line batch ran 15% faster, but a 1,000,000-line
	// one on bbolt peaked at 60 MiB of RSS (46.6 MiB at 24).
	batchMemoryLimit = 24 << 20
	// batchGCPercent is a batch's GOGC (unless GOGC sets one). At the
	// default 100 a batch's few MiB of live heap made the collector run
	// every 8 MiB allocated (a hundred times for 100,000 lines); under the
	// memory limit above, a higher one lets the heap grow to that limit
	// between collections instead, and no further.
	batchGCPercent = 400
)

func runAdmitBatch(ctx context.Context, o *admitOptions) error {
	cfg, p, err := o.f.configAndPrinter()
	if err != nil {
		return err
	}
	var src io.Reader = o.f.IO.In
	if o.Batch != "-" {
		fh, err := os.Open(o.Batch)
		if err != nil {
			return backend.Errorf(backend.ErrInvalid, "admit --batch: %v", err)
		}
		defer fh.Close()
		src = fh
	}
	// A batch holds three chunks at a time (one being read, one being
	// committed, the results of the one before being printed): a soft
	// memory limit (unless GOMEMLIMIT sets one) makes the collector keep
	// the heap near that, instead of letting it double between collections
	// while the store's pages take their share of the process's memory.
	if old := debug.SetMemoryLimit(-1); old == math.MaxInt64 {
		debug.SetMemoryLimit(batchMemoryLimit)
		defer debug.SetMemoryLimit(old)
		if os.Getenv("GOGC") == "" {
			defer debug.SetGCPercent(debug.SetGCPercent(batchGCPercent))
		}
	}
	b := &batchRun{ctx: ctx, o: o, p: p, cfg: cfg, out: bufio.NewWriter(o.f.IO.Out)}
	err = readBatch(src, cfg.Principal, b)
	if ferr := b.out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	return b.result()
}

// batchRun commits and prints the chunks of one admit --batch. It is
// readBatch's sink: a chunk's store call runs while the next chunk is
// validated and the one before it printed, so the store's commit, the
// checking of input and the printing of results share the machine's cores
// instead of taking turns. Chunks are sent to the store one at a time, in
// order: a chunk is sent only when the one before it is committed.
type batchRun struct {
	ctx context.Context
	o   *admitOptions
	p   *printer
	cfg *Config
	out *bufio.Writer
	svc *admission.Service
	buf []byte // emit's line

	call  *batchCall // the chunk sent last, until its results are printed
	worst error      // the worst line's failure so far (worseError)
}

// batchCall is one chunk's store call and what printing its results needs.
type batchCall struct {
	lines []batchRef // the chunk's lines, in order
	good  int        // how many of them were sent
	done  chan struct{}

	// set before done is closed
	results []backend.AdmitResult
	err     error
}

// batchRef is what printing a line's result needs of it.
type batchRef struct {
	n   int
	err error
}

// commit validates a chunk, waits for the chunk before it to be committed
// and sends this one to the store without waiting for it, then prints the
// results of the chunk before. When the store failed that chunk whole, its
// results are printed, this chunk is dropped untried and the batch stops
// (errStopBatch): every earlier chunk stays committed and printed.
func (b *batchRun) commit(chunk []batchLine) error {
	call := &batchCall{lines: make([]batchRef, len(chunk)), done: make(chan struct{})}
	good := make([]admission.Input, 0, len(chunk))
	for i, l := range chunk {
		call.lines[i] = batchRef{n: l.n, err: l.err}
		if l.err == nil {
			good = append(good, l.in)
		}
	}
	var prep *admission.Prepared
	if len(good) > 0 {
		if b.svc == nil {
			svc, err := b.o.f.Admission()
			if err != nil {
				// The chunks before (bad lines alone) are reported still.
				if ferr := b.finish(); ferr != nil && !errors.Is(ferr, errStopBatch) {
					return ferr
				}
				return err
			}
			b.svc = svc
		}
		for i := range good {
			good[i].Principal = b.cfg.Principal // as resolved when the store opened
		}
		prep, call.good = b.svc.Prepare(good), len(good)
	}
	prev := b.call
	if prev != nil {
		if <-prev.done; prev.err != nil {
			return b.finish()
		}
	}
	b.call = call
	if prep == nil {
		close(call.done)
	} else {
		go func() {
			defer close(call.done)
			call.results, call.err = b.svc.Commit(b.ctx, prep)
		}()
	}
	if prev == nil {
		return nil
	}
	if err := b.print(prev); err != nil {
		<-call.done // no store call is left running when the batch ends
		b.call = nil
		return err
	}
	return nil
}

// running is closed when the chunk sent last is committed; nil when every
// chunk sent is printed.
func (b *batchRun) running() <-chan struct{} {
	if b.call == nil {
		return nil
	}
	return b.call.done
}

// finish waits for the chunk sent last and prints its results.
func (b *batchRun) finish() error {
	call := b.call
	if call == nil {
		return nil
	}
	b.call = nil
	<-call.done
	return b.print(call)
}

// print prints every line's result of a committed chunk, in order. A store
// failure of the whole call still sets each line's error: every line is
// reported, and a failure of some lines (a Redis call spanning sessions)
// never hides the lines committed; then the batch stops (errStopBatch).
func (b *batchRun) print(call *batchCall) error {
	results, callErr := call.results, call.err
	if call.good > 0 {
		if callErr != nil && len(results) != call.good {
			return callErr
		}
		if len(results) != call.good {
			return backend.Errorf(backend.ErrInternal, "admit --batch: %d results for %d inputs", len(results), call.good)
		}
	}
	k := 0
	for _, l := range call.lines {
		lerr := l.err
		var r backend.AdmitResult
		if lerr == nil {
			r = results[k]
			k++
			lerr = r.Err
		}
		if lerr != nil {
			if err := b.bad(l.n, lerr); err != nil {
				return err
			}
			continue
		}
		if err := b.emit(admission.AdmitJSON(r), func(w io.Writer) error { return admitText(w, r) }); err != nil {
			return err
		}
	}
	if err := b.out.Flush(); err != nil {
		return err
	}
	if callErr != nil {
		return errStopBatch // the store failed the chunk whole: try no more
	}
	return nil
}

// errStopBatch ends the reading of a batch whose store call failed whole.
var errStopBatch = errors.New("batch stopped")

// bad prints a line's failure: on stdout as its result, on stderr as one
// error line.
func (b *batchRun) bad(n int, lerr error) error {
	b.worst = worseError(b.worst, lerr)
	be := batchError{Line: n, Error: string(backend.CodeOf(lerr)), Message: termtext.OneLine(lerr.Error())}
	if err := b.emit(be, textf("error line %d: %s\n", be.Line, be.Message)); err != nil {
		return err
	}
	printError(b.o.f.IO.ErrOut, b.p.format, be.Error, fmt.Sprintf("line %d: %s", be.Line, be.Message))
	return nil
}

// emit writes one result line to the buffered stdout. JSON lines are
// written by segmentio's encoder, with the bytes printer.marshal writes
// (no HTML escaping, map keys sorted; a test compares them) at a fraction
// of its cost: a batch prints one per line. The only raw message in a
// result is the admission's JSON, made by its MarshalJSON, which the
// encoder trusts instead of parsing it again.
func (b *batchRun) emit(v any, text func(w io.Writer) error) error {
	if b.p.text() {
		return text(b.out)
	}
	var err error
	b.buf, err = fastjson.Append(b.buf[:0], v, fastjson.SortMapKeys|fastjson.TrustRawMessage)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	b.buf = append(b.buf, '\n')
	_, err = b.out.Write(b.buf)
	return err
}

// result is the batch's exit: the worst line's (worseError).
func (b *batchRun) result() error {
	switch {
	case b.worst == nil:
		return nil
	case backend.CodeOf(b.worst) == backend.CodeInvalid:
		return &reportedError{backend.Errorf(backend.ErrInvalid, "admit --batch: bad input lines")}
	}
	return &reportedError{b.worst}
}
