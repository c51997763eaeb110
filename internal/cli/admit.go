package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

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
