package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/backend"
)

// printer writes a command's data to stdout in the configured format.
type printer struct {
	ios    *IOStreams
	format string
}

func (f *Factory) printer() (*printer, error) {
	_, p, err := f.configAndPrinter()
	return p, err
}

// configAndPrinter resolves the configuration and the printer it selects:
// the start of every command that prints.
func (f *Factory) configAndPrinter() (*Config, *printer, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, nil, err
	}
	return cfg, &printer{ios: f.IO, format: cfg.Output}, nil
}

func (p *printer) text() bool { return p.format == formatText }

// textf is the text rendering of a one-line result: format and args as
// for fmt.Fprintf, string arguments escaped (termtext.Escape).
func textf(format string, args ...any) func(w io.Writer) error {
	return func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format, escArgs(args)...)
		return err
	}
}

// marshal encodes v as JSON without HTML escaping; indented for a terminal
// with -o json, compact otherwise.
func (p *printer) marshal(v any, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	return buf.Bytes(), nil
}

// object prints one object: JSON for json/jsonl, text() otherwise.
func (p *printer) object(v any, text func(w io.Writer) error) error {
	if p.text() {
		return text(p.ios.Out)
	}
	b, err := p.marshal(v, p.format == formatJSON && p.ios.IsStdoutTTY())
	if err != nil {
		return err
	}
	_, err = p.ios.Out.Write(b)
	return err
}

// line prints one object as one line (jsonl-style) in JSON formats: for
// results that stream (admit --batch, attach).
func (p *printer) line(v any, text func(w io.Writer) error) error {
	if p.text() {
		return text(p.ios.Out)
	}
	b, err := p.marshal(v, false)
	if err != nil {
		return err
	}
	_, err = p.ios.Out.Write(b)
	return err
}

// list prints a listing: one array with -o json, one object a line with
// -o jsonl, text() otherwise.
func list[T any](p *printer, items []T, text func(w io.Writer) error) error {
	switch p.format {
	case formatJSON:
		if items == nil {
			items = []T{}
		}
		b, err := p.marshal(items, p.ios.IsStdoutTTY())
		if err != nil {
			return err
		}
		_, err = p.ios.Out.Write(b)
		return err
	case formatJSONL:
		for _, it := range items {
			b, err := p.marshal(it, false)
			if err != nil {
				return err
			}
			if _, err := p.ios.Out.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	return text(p.ios.Out)
}

// escArgs escapes the string arguments of a text format.
func escArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = termtext.Esc(s)
		}
		out[i] = a
	}
	return out
}

// fields writes "key: value" lines, aligned, every value escaped.
func fields(w io.Writer, kv [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, f := range kv {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], termtext.Esc(f[1]))
	}
	return tw.Flush()
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// textWidth is how many runes of an input's text a listing shows: cut on a
// terminal, whole when piped.
func (p *printer) textWidth() int {
	if p.ios.IsStdoutTTY() {
		return 48
	}
	return 0
}

// admissionFields is an admission as "key: value" lines (show, find,
// resolve, cancel).
func admissionFields(w io.Writer, a backend.Admission) error {
	return fields(w, [][2]string{
		{"id", a.ID},
		{"session", a.Session},
		{"seq", fmt.Sprint(a.Seq)},
		{"kind", string(a.Kind)},
		{"producer", termtext.OrDash(a.Producer)},
		{"principal", termtext.OrDash(a.Principal)},
		{"request id", termtext.OrDash(a.RequestID)},
		{"identities", termtext.OrDash(strings.Join(a.Identities, ", "))},
		{"pinned target", termtext.OrDash(a.PinnedTarget)},
		{"delivered to", termtext.OrDash(a.DeliveredTo)},
		{"status", string(a.Status)},
		{"outcome", termtext.OrDash(string(a.Outcome))},
		{"mode", termtext.OrDash(string(a.Mode))},
		{"epoch", fmt.Sprint(a.Epoch)},
		{"generation", fmt.Sprint(a.Generation)},
		{"admitted at", timeText(a.AdmittedAt)},
		{"started at", timeText(a.StartedAt)},
		{"settled at", timeText(a.SettledAt)},
		{"replay of", termtext.OrDash(a.ReplayOf)},
		{"error", termtext.OrDash(termtext.Cell(a.Error, 0))},
		{"text", termtext.Cell(a.Text(), 0)},
	})
}

// admissionTable is a listing of admissions (queue).
func admissionTable(w io.Writer, as []backend.Admission, width int) error {
	rows := make([][]string, 0, len(as))
	for _, a := range as {
		rows = append(rows, []string{
			fmt.Sprint(a.Seq), a.ID, string(a.Kind), string(a.Status),
			termtext.OrDash(string(a.Outcome)), termtext.OrDash(string(a.Mode)), termtext.Cell(a.Text(), width),
		})
	}
	return termtext.Table(w, []string{"SEQ", "ID", "KIND", "STATUS", "OUTCOME", "MODE", "TEXT"}, rows)
}

// messageText writes one transcript message: "[seq] role: content", the
// content escaped but for its newlines and tabs.
func messageText(w io.Writer, m backend.Message) error {
	_, err := fmt.Fprintf(w, "[%d] %s: %s\n", m.Seq, termtext.Esc(string(m.Role)), termtext.Escape(m.Content, true))
	return err
}

// sessionFields is a session as "key: value" lines.
func sessionFields(w io.Writer, s backend.Session, now time.Time) error {
	lease := "none"
	if s.LeaseHolder != "" {
		state := "expired"
		if s.LeaseLive(now) {
			state = "live"
		}
		lease = fmt.Sprintf("%s until %s (%s)", s.LeaseHolder, timeText(s.LeaseExpiresAt), state)
	}
	grants := "-"
	if len(s.Grants) > 0 {
		var gs []string
		for _, g := range s.Grants {
			gs = append(gs, grantText(g))
		}
		grants = strings.Join(gs, ", ")
	}
	return fields(w, [][2]string{
		{"id", s.ID},
		{"owner", s.Owner},
		{"granted", grants},
		{"current transcript", s.CurrentTranscript},
		{"state", s.State()},
		{"depth", fmt.Sprint(s.Queued)},
		{"running", fmt.Sprint(s.Running)},
		{"unknown", fmt.Sprint(s.Unknown)},
		{"viewers", fmt.Sprint(s.Viewers)},
		{"epoch", fmt.Sprint(s.Epoch)},
		{"lease", lease},
		{"created at", timeText(s.CreatedAt)},
	})
}

func printAdmission(p *printer, a backend.Admission) error {
	return p.object(a, func(w io.Writer) error { return admissionFields(w, a) })
}
