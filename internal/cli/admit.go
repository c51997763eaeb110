package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

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

	textSet, payloadSet bool
}

func newAdmitCmd(f *Factory) *cobra.Command {
	o := &admitOptions{f: f}
	cmd := &cobra.Command{
		Use:   "admit SESSION [--text T | --payload JSON | < stdin]",
		Short: "Commit an input to a session's queue",
		Long: `Admit commits one input durably to the session's FIFO queue before it
returns. The text comes from --text, from --payload (a JSON object with a
"text" member) or from stdin (one trailing newline removed).

Human input may carry --request-id: the same (principal, request id) with
the same payload returns the existing admission ("duplicate", exit 0); with
another payload it is refused (exit 4). A first human input to an unknown
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
needs no "identities"). One result is printed per line, in order. A bad
line is reported with its line number and the good lines are still
admitted, each line's result printed whatever happened to the others. The
exit code is the worst line's: 1 (internal) before 75 (store unavailable:
retry the batch; committed lines come back as duplicates when they carry a
request id or identities) before 5, 7, 4, 3, and 2 (a malformed line).
With -o json or jsonl, --batch prints one JSON object a line: the admit
result, or {"line":N,"error":"invalid","message":"..."} for a bad line.`,
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
			if len(args) == 1 {
				o.Session = args[0]
			}
			o.textSet = cmd.Flags().Changed("text")
			o.payloadSet = cmd.Flags().Changed("payload")
			if o.Batch != "" {
				return runAdmitBatch(cmd.Context(), o)
			}
			return runAdmit(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Text, "text", "", "the input's text")
	fl.StringVar(&o.Payload, "payload", "", `the input as a JSON object with a "text" member`)
	fl.StringVar(&o.RequestID, "request-id", "", "human input: idempotency key, unique per principal")
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
	fmt.Fprintf(&b, "%s %s seq %d (%s)", r.Result, r.Admission.ID, r.Admission.Seq, r.Admission.Session)
	if r.Result != backend.ResultDuplicate {
		for _, d := range r.Duplicates {
			fmt.Fprintf(&b, "; duplicate %s", d)
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
	lines, err := readBatch(src, cfg.Principal)
	if err != nil {
		return err
	}

	var good []admission.Input
	for _, l := range lines {
		if l.err == nil {
			good = append(good, l.in)
		}
	}
	var results []backend.AdmitResult
	if len(good) > 0 {
		svc, err := o.f.Admission()
		if err != nil {
			return err
		}
		for i := range good {
			good[i].Principal = cfg.Principal // as resolved when the store opened
		}
		// A store failure of the whole call still sets each line's error:
		// every line is reported, and a failure of some lines (a Redis
		// call spanning sessions) never hides the lines committed.
		results, err = svc.AdmitBatch(ctx, good)
		if err != nil && len(results) != len(good) {
			return err
		}
		if len(results) != len(good) {
			return backend.Errorf(backend.ErrInternal, "admit --batch: %d results for %d inputs", len(results), len(good))
		}
	}

	var worst error
	k := 0
	for _, l := range lines {
		lerr := l.err
		var r backend.AdmitResult
		if lerr == nil {
			r = results[k]
			k++
			lerr = r.Err
		}
		if lerr != nil {
			worst = worseError(worst, lerr)
			be := batchError{Line: l.n, Error: string(backend.CodeOf(lerr)), Message: oneLine(lerr.Error())}
			if err := p.line(be, textf("error line %d: %s\n", be.Line, be.Message)); err != nil {
				return err
			}
			printError(o.f.IO.ErrOut, p.format, be.Error, fmt.Sprintf("line %d: %s", be.Line, be.Message))
			continue
		}
		if err := p.line(admission.AdmitJSON(r), func(w io.Writer) error { return admitText(w, r) }); err != nil {
			return err
		}
	}
	switch {
	case worst == nil:
		return nil
	case backend.CodeOf(worst) == backend.CodeInvalid:
		return &reportedError{backend.Errorf(backend.ErrInvalid, "admit --batch: bad input lines")}
	}
	return &reportedError{worst}
}

// readBatch reads NDJSON inputs, one a line. Blank lines are skipped; a line
// that is not one JSON object of the input shape is kept with its error.
func readBatch(r io.Reader, principal string) ([]batchLine, error) {
	br := bufio.NewReader(r)
	var out []batchLine
	for n := 1; ; n++ {
		raw, tooLong, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("admit --batch: read line %d: %w", n, err)
		}
		eof := errors.Is(err, io.EOF)
		if eof && len(raw) == 0 && !tooLong {
			return out, nil
		}
		if tooLong {
			out = append(out, batchLine{n: n, err: backend.Errorf(backend.ErrInvalid, "line longer than %d bytes", maxInputRead-1)})
		} else if len(bytes.TrimSpace(raw)) > 0 {
			in, perr := parseBatchLine(raw)
			in.Principal = principal
			out = append(out, batchLine{n: n, in: in, err: perr})
		}
		if eof {
			return out, nil
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

func parseBatchLine(raw []byte) (admission.Input, error) {
	var in admission.Input
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, "not an input object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, "more than one JSON value on the line")
	}
	// null is an absent value (docs/contract.md §11), for "payload" as for the
	// string members, which decode it as "".
	if string(bytes.TrimSpace(in.Payload)) == "null" {
		in.Payload = nil
	}
	if in.Text != "" && len(in.Payload) > 0 {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, `both "text" and "payload": give one`)
	}
	if in.Producer == "" && (len(in.Identities) > 0 || in.Target != "") {
		return admission.Input{}, backend.Errorf(backend.ErrInvalid, `"identities" and "target" need "producer"`)
	}
	return in, nil
}
