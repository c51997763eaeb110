package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"

	fastjson "github.com/segmentio/encoding/json"
	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// maxInputRead bounds what admit reads from stdin or one --batch line: more
// than any payload the admission layer accepts (4 MiB), so an oversized input
// is refused by the size check with a clear message rather than cut.
const maxInputRead = backend.MaxInputLine

type admitOptions struct {
	f *Factory

	Session    string
	Text       string
	Payload    string
	RequestID  string
	Producer   string
	Identities []string
	Parts      []string
	Target     string
	Reopen     bool
	Batch      string

	textSet, payloadSet, requestIDSet bool
}

func newAdmitCmd(f *Factory) *cobra.Command {
	o := &admitOptions{f: f}
	cmd := &cobra.Command{
		Use:   "admit SESSION [--text T | --payload JSON | < stdin]",
		Short: "Commit an input to a session's queue",
		Long: `Admit commits one input durably to the session's FIFO queue before it
returns. The text comes from --text, from --payload (a JSON object with a
"text" member) or from stdin (one trailing newline removed).

Human input may carry --request-id: a request id is scoped to its session
(and principal): the same (session, principal, request id) with the same
payload returns the existing admission ("duplicate", exit 0); with another
payload it is refused (exit 4). The same id in another session is another
input. A request id is 1-256 bytes of valid UTF-8 without control or
bidirectional formatting characters. A first human input to an unknown
session creates it, owned by the principal.

Automation input names its --producer and one or more --identity: identities
already held by an admission of the session resolve to it ("duplicate"); the
others form one new admission ("admitted", or "coalesced" with several).
With --part, each --identity brings its own text (the first --part is the
first --identity's, and so on) instead of one --text for the group: the new
admission is made of the parts of the identities not yet held, so a
regrouped re-offer never carries a held identity's result twice. One part
is the admission's payload as it is; several compose
{"parts":[{"identity":ID,"payload":P},...],"text":"TEXT1\nTEXT2..."}.

With --batch FILE (or - for stdin) every line is one NDJSON input
{"session","text"|"payload","request_id","producer","identities":[],"target"};
an automation line may give "parts":[{"identity":ID,"text":T},
{"identity":ID,"payload":{...}},...] instead of "text"/"payload" (and then
needs no "identities"). Lines are parsed strictly: one JSON object of
exactly these field names (no other spelling or case), no repeated field,
valid UTF-8, no byte-order mark; nothing is repaired. One result is printed
per line, in order. A bad line is reported with its line number and the good
lines are still admitted, each line's result printed whatever happened to
the others. The exit code is the worst line's: 1 (internal) before 75
(store unavailable: retry the batch; committed lines come back as
duplicates when they carry a request id or identities) before 5, 7, 4, 3,
and 2 (a malformed line). With -o json or jsonl, --batch prints one JSON
object a line: the admit result, or
{"line":N,"error":"invalid","message":"..."} for a bad line.

A batch is read, committed and printed in chunks (1,024 lines or 1 MiB, or
what has arrived when a pipe's input pauses), so a batch of any size runs in
bounded memory, every result printed is committed, and a line written into
a pipe now and then is admitted at once. If the store fails a chunk as a whole (unavailable), its lines are
reported failed and the batch stops there: the chunks before it are
committed, the lines after it were not tried. A batch killed part-way leaves
its earlier chunks committed (on bbolt each chunk is one transaction; on
Redis a chunk's lines of one session are one atomic step, sessions one after
another, so a chunk may be part-committed). Re-running the whole batch is
safe for lines with a request id or identities (they come back
"duplicate"); a human line without a request id would be admitted again.`,
		Example: `  hermesq admit s1 --text "summarise the log"
  echo "hello" | hermesq admit s1 --request-id msg-42
  hermesq admit s1 --producer ci --identity build:981 --text "[finished] build (exit 0)"
  hermesq admit s1 --producer delegation --identity A --part RESULT_alpha --identity B --part RESULT_bravo
  hermesq admit --batch inputs.ndjson -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.Batch != "" {
				if len(args) > 0 {
					return fmt.Errorf("admit --batch takes no SESSION argument: the sessions are in the NDJSON lines")
				}
				return nil
			}
			if len(args) != 1 {
				return fmt.Errorf("admit takes one SESSION argument, got %d (or use --batch FILE)", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeSessionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.MayCreateStore() // a command that writes may create the store
			if len(args) == 1 {
				o.Session = args[0]
			}
			o.textSet = cmd.Flags().Changed("text")
			o.payloadSet = cmd.Flags().Changed("payload")
			o.requestIDSet = cmd.Flags().Changed("request-id")
			if o.Batch != "" {
				return runAdmitBatch(cmd.Context(), o)
			}
			return runAdmit(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Text, "text", "", "the input's text")
	fl.StringVar(&o.Payload, "payload", "", `the input as a JSON object with a "text" member`)
	fl.StringVar(&o.RequestID, "request-id", "", "human input: idempotency key, scoped to the session (1-256 bytes)")
	fl.StringVar(&o.Producer, "producer", "", "automation input: the producer's name")
	fl.StringArrayVar(&o.Identities, "identity", nil, "automation input: an identity of the producer event (repeatable)")
	fl.StringArrayVar(&o.Parts, "part", nil, "automation input: the text of one identity's own part, the Nth --part for the Nth --identity (repeatable)")
	fl.StringVar(&o.Target, "target", "", "automation input: the transcript the work started from (default: the session's current)")
	fl.BoolVar(&o.Reopen, "reopen", false, "human input: reopen the session's closed current transcript")
	fl.StringVar(&o.Batch, "batch", "", "admit NDJSON inputs from FILE, or - for stdin")
	cmd.MarkFlagsMutuallyExclusive("text", "payload")
	cmd.MarkFlagsMutuallyExclusive("text", "part")
	cmd.MarkFlagsMutuallyExclusive("payload", "part")
	for _, other := range []string{"text", "payload", "request-id", "producer", "identity", "part", "target", "reopen"} {
		cmd.MarkFlagsMutuallyExclusive("batch", other)
	}
	_ = cmd.MarkFlagFilename("batch", "ndjson", "jsonl", "json")
	return cmd
}

// input builds the admission input from the flags and stdin.
func (o *admitOptions) input(cfg *Config) (admission.Input, error) {
	in := admission.Input{
		Session:    o.Session,
		RequestID:  o.RequestID,
		Producer:   o.Producer,
		Identities: o.Identities,
		Target:     o.Target,
		Principal:  cfg.Principal,
		Reopen:     o.Reopen,
	}
	switch {
	case o.Producer == "" && len(o.Identities) > 0:
		return in, backend.Errorf(backend.ErrInvalid, "--identity needs --producer (it is for automation input)")
	case o.Producer == "" && o.Target != "":
		return in, backend.Errorf(backend.ErrInvalid, "--target needs --producer (it is for automation input)")
	case o.Producer != "" && o.RequestID != "":
		return in, backend.Errorf(backend.ErrInvalid, "--request-id is for human input, not with --producer")
	case o.Producer != "" && o.Reopen:
		return in, backend.Errorf(backend.ErrInvalid, "--reopen is for human input, not with --producer")
	case o.requestIDSet && o.RequestID == "":
		return in, backend.Errorf(backend.ErrInvalid, "--request-id is empty: give 1-256 bytes, or leave it out")
	case o.Producer == "" && len(o.Parts) > 0:
		return in, backend.Errorf(backend.ErrInvalid, "--part needs --producer (it is for automation input)")
	case len(o.Parts) > 0 && len(o.Parts) != len(o.Identities):
		return in, backend.Errorf(backend.ErrInvalid, "%d --part for %d --identity: give each --identity its --part, in order", len(o.Parts), len(o.Identities))
	}
	if len(o.Parts) > 0 {
		in.Identities = nil
		for i, text := range o.Parts {
			in.Parts = append(in.Parts, admission.Part{Identity: o.Identities[i], Text: text})
		}
		return in, nil
	}
	switch {
	case o.payloadSet:
		in.Payload = json.RawMessage(o.Payload)
		if len(bytes.TrimSpace(in.Payload)) == 0 {
			return in, backend.Errorf(backend.ErrInvalid, "--payload is empty: want a JSON object with a \"text\" member")
		}
	case o.textSet:
		in.Text = o.Text
	default:
		if o.f.IO.IsStdinTTY() {
			return in, backend.Errorf(backend.ErrInvalid, "no input: give --text, --payload or pipe the text on stdin")
		}
		b, err := io.ReadAll(io.LimitReader(o.f.IO.In, maxInputRead))
		if err != nil {
			return in, fmt.Errorf("read stdin: %w", err)
		}
		s := strings.TrimSuffix(string(b), "\n")
		in.Text = strings.TrimSuffix(s, "\r")
	}
	return in, nil
}

func runAdmit(ctx context.Context, o *admitOptions) error {
	cfg, p, err := o.f.configAndPrinter()
	if err != nil {
		return err
	}
	in, err := o.input(cfg)
	if err != nil {
		return err
	}
	svc, err := o.f.Admission()
	if err != nil {
		return err
	}
	in.Principal = cfg.Principal // as resolved when the store opened
	r, err := svc.Admit(ctx, in)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return r.Err
	}
	return p.object(admission.AdmitJSON(r), func(w io.Writer) error { return admitText(w, r) })
}

// admitText is one result line: "admitted 3f2a… seq 1 (s1)".
func admitText(w io.Writer, r backend.AdmitResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s seq %d (%s)", r.Result, termtext.Esc(r.Admission.ID), r.Admission.Seq, termtext.Esc(r.Admission.Session))
	if r.Result != backend.ResultDuplicate {
		for _, d := range r.Duplicates {
			fmt.Fprintf(&b, "; duplicate %s", termtext.Esc(d))
		}
	}
	if r.PayloadDiffers {
		b.WriteString("; payload differs, the first committed payload is kept")
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

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
	// A batch holds two chunks at a time: a soft memory limit (unless
	// GOMEMLIMIT sets one) makes the collector keep the heap near that,
	// instead of letting it double between collections while the store's
	// pages take their share of the process's memory.
	if old := debug.SetMemoryLimit(-1); old == math.MaxInt64 {
		debug.SetMemoryLimit(batchMemoryLimit)
		defer debug.SetMemoryLimit(old)
	}
	b := &batchRun{o: o, p: p, cfg: cfg, out: bufio.NewWriter(o.f.IO.Out)}
	err = readBatch(src, cfg.Principal, func(chunk []batchLine) error { return b.commit(ctx, chunk) })
	if ferr := b.out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	return b.result()
}

// batchRun commits and prints the chunks of one admit --batch.
type batchRun struct {
	o   *admitOptions
	p   *printer
	cfg *Config
	out *bufio.Writer
	svc *admission.Service
	buf []byte // emit's line

	worst error // the worst line's failure so far (worseError)
}

// commit admits the good lines of one chunk in one store call and prints
// every line's result, in order, before the next chunk is read. When the
// store fails the call as a whole, the chunk's lines are reported failed
// and the batch stops: every earlier chunk stays committed and printed.
func (b *batchRun) commit(ctx context.Context, chunk []batchLine) error {
	var good []admission.Input
	for _, l := range chunk {
		if l.err == nil {
			good = append(good, l.in)
		}
	}
	var results []backend.AdmitResult
	var callErr error
	if len(good) > 0 {
		if b.svc == nil {
			svc, err := b.o.f.Admission()
			if err != nil {
				return err
			}
			b.svc = svc
		}
		for i := range good {
			good[i].Principal = b.cfg.Principal // as resolved when the store opened
		}
		// A store failure of the whole call still sets each line's error:
		// every line is reported, and a failure of some lines (a Redis
		// call spanning sessions) never hides the lines committed.
		results, callErr = b.svc.AdmitBatch(ctx, good)
		if callErr != nil && len(results) != len(good) {
			return callErr
		}
		if len(results) != len(good) {
			return backend.Errorf(backend.ErrInternal, "admit --batch: %d results for %d inputs", len(results), len(good))
		}
	}
	k := 0
	for _, l := range chunk {
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
// of its cost: a batch prints one per line.
func (b *batchRun) emit(v any, text func(w io.Writer) error) error {
	if b.p.text() {
		return text(b.out)
	}
	var err error
	b.buf, err = fastjson.Append(b.buf[:0], v, fastjson.SortMapKeys)
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

// alwaysReady is inputReady's answer for input that never waits.
func alwaysReady() bool { return true }

// readBatch reads NDJSON inputs, one a line, and hands them to commit in
// chunks (batchChunkLines, batchChunkBytes), and whenever the input pauses:
// a line read with nothing more to read without waiting is committed at
// once, so a producer writing now and then into a pipe sees each line
// admitted without waiting for a chunk to fill. Blank lines are skipped; a
// line that is not one input object is kept with its error.
//
// Reading and parsing run in a goroutine of their own, one chunk ahead of
// commit: while a chunk is committed (its transaction written and synced,
// its results printed), the next is parsed, so the two share the machine's
// cores instead of taking turns. Chunks reach commit in order, one at a
// time; at most two are held (the one committing, the one being read).
// When commit stops the batch (errStopBatch: the store failed a chunk
// whole), the chunk read ahead is dropped untried and readBatch returns
// without waiting for the reader, which may be blocked on input that never
// ends; it stops at its next chunk.
func readBatch(r io.Reader, principal string, commit func([]batchLine) error) error {
	chunks := make(chan []batchLine)  // reader -> commit, in order
	free := make(chan []batchLine, 2) // commit -> reader, chunks to reuse
	quit := make(chan struct{})       // commit -> reader: stop
	readErr := make(chan error, 1)    // the reader's end
	for range 2 {
		free <- make([]batchLine, 0, batchChunkLines)
	}
	go func() {
		defer close(chunks)
		readErr <- readChunks(r, principal, free, chunks, quit)
	}()
	defer close(quit)
	for chunk := range chunks {
		err := commit(chunk)
		clear(chunk) // drop the inputs: memory stays bounded by two chunks
		free <- chunk[:0]
		if errors.Is(err, errStopBatch) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return <-readErr
}

// readChunks is readBatch's reader: it fills chunks taken from free and
// sends them on chunks until the input ends or quit is closed.
func readChunks(r io.Reader, principal string, free <-chan []batchLine, chunks chan<- []batchLine, quit <-chan struct{}) error {
	ready := inputReady(r)
	br := bufio.NewReaderSize(r, batchChunkBytes)
	var chunk []batchLine
	select {
	case chunk = <-free:
	case <-quit:
		return nil
	}
	size := 0
	flush := func() bool {
		if len(chunk) == 0 {
			return true
		}
		select {
		case chunks <- chunk:
		case <-quit:
			return false
		}
		select {
		case chunk = <-free:
		case <-quit:
			return false
		}
		size = 0
		return true
	}
	for n := 1; ; n++ {
		raw, tooLong, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("admit --batch: read line %d: %w", n, err)
		}
		eof := errors.Is(err, io.EOF)
		if eof && len(raw) == 0 && !tooLong {
			flush()
			return nil
		}
		if tooLong {
			chunk = append(chunk, batchLine{n: n, err: backend.Errorf(backend.ErrInvalid, "line longer than %d bytes", maxInputRead-1)})
		} else if len(bytes.TrimSpace(raw)) > 0 {
			in, perr := parseBatchLine(raw)
			in.Principal = principal
			chunk = append(chunk, batchLine{n: n, in: in, err: perr})
			size += len(raw)
		}
		if eof {
			flush()
			return nil
		}
		if len(chunk) >= batchChunkLines || size >= batchChunkBytes || br.Buffered() == 0 && !ready() {
			if !flush() {
				return nil
			}
		}
	}
}

// readLine reads one line without its newline; a line longer than
// maxInputRead is consumed and reported as too long.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > maxInputRead {
				tooLong, line = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), tooLong, err
	}
}

// batchFields are the members of a --batch line, spelled exactly.
var batchFields = []string{"session", "text", "payload", "request_id", "producer", "identities", "target", "parts"}

// partFields are the members of one of a --batch line's "parts".
var partFields = []string{"identity", "text", "payload"}

// parseBatchLine parses one --batch line strictly: one JSON object (valid
// UTF-8, no byte-order mark, no repeated key) whose members are among
// batchFields, spelled exactly, each of its type. null is an absent value.
// Nothing is repaired or guessed.
func parseBatchLine(raw []byte) (admission.Input, error) {
	var in admission.Input
	m, err := backend.StrictObject(raw, "input line", batchFields...)
	if err != nil {
		return in, err
	}
	str := func(name string, dst *string) error {
		v, ok := m[name]
		if !ok || string(v) == "null" {
			return nil
		}
		if len(v) == 0 || v[0] != '"' {
			return backend.Errorf(backend.ErrInvalid, "field %q: want a string", name)
		}
		return json.Unmarshal(v, dst)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"session", &in.Session}, {"text", &in.Text}, {"request_id", &in.RequestID}, {"producer", &in.Producer}, {"target", &in.Target}} {
		if err := str(f.name, f.dst); err != nil {
			return admission.Input{}, err
		}
	}
	if v, ok := m["identities"]; ok && string(v) != "null" {
		if len(v) == 0 || v[0] != '[' {
			return admission.Input{}, backend.Errorf(backend.ErrInvalid, `field "identities": want a list of strings`)
		}
		if err := json.Unmarshal(v, &in.Identities); err != nil {
			return admission.Input{}, backend.Errorf(backend.ErrInvalid, `field "identities": want a list of strings`)
		}
	}
	if v, ok := m["parts"]; ok && string(v) != "null" {
		parts, err := parseParts(v)
		if err != nil {
			return admission.Input{}, err
		}
		in.Parts = parts
	}
	if v, ok := m["request_id"]; ok && in.RequestID == "" && string(v) != "null" {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, `field "request_id" is empty: give 1-256 bytes, or null`)
	}
	if v, ok := m["payload"]; ok && string(v) != "null" {
		in.Payload = v
	}
	if in.Text != "" && len(in.Payload) > 0 {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, `both "text" and "payload": give one`)
	}
	if in.Producer == "" && (len(in.Identities) > 0 || in.Target != "" || len(in.Parts) > 0) {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, `"identities", "parts" and "target" need "producer"`)
	}
	if len(in.Parts) > 0 && (in.Text != "" || len(in.Payload) > 0) {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, `"parts" with "text" or "payload": give the parts alone`)
	}
	return in, nil
}

// parseParts reads a --batch line's "parts": a list of objects, each with
// exactly "identity" and one of "text" or "payload" (already checked
// strictly as part of the line).
func parseParts(v json.RawMessage) ([]admission.Part, error) {
	var raws []json.RawMessage
	if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &raws) != nil {
		return nil, backend.Errorf(backend.ErrInvalid, `field "parts": want a list of {"identity","text"|"payload"} objects`)
	}
	if len(raws) == 0 {
		return nil, backend.Errorf(backend.ErrInvalid, `field "parts" is empty: give one part per identity, or leave "parts" out`)
	}
	parts := make([]admission.Part, 0, len(raws))
	for i, r := range raws {
		what := fmt.Sprintf("part %d", i+1)
		m, err := backend.StrictObject(r, what, partFields...)
		if err != nil {
			return nil, err
		}
		var p admission.Part
		id, ok := m["identity"]
		if !ok || len(id) == 0 || id[0] != '"' {
			return nil, backend.Errorf(backend.ErrInvalid, `%s: "identity" must be a string`, what)
		}
		_ = json.Unmarshal(id, &p.Identity)
		text, hasText := m["text"]
		payload, hasPayload := m["payload"]
		switch {
		case hasText == hasPayload:
			return nil, backend.Errorf(backend.ErrInvalid, `%s: give exactly one of "text" and "payload"`, what)
		case hasText:
			if len(text) == 0 || text[0] != '"' {
				return nil, backend.Errorf(backend.ErrInvalid, `%s: "text" must be a string`, what)
			}
			_ = json.Unmarshal(text, &p.Text)
		default:
			p.Payload = payload
		}
		parts = append(parts, p)
	}
	return parts, nil
}
