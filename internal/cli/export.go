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
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/backend"
)

func newExportCmd(f *Factory) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export [--file F]",
		Short: "Write every record of the store as NDJSON",
		Long: `Export writes every record of the store, one JSON object a line: for each
session the session, then its transcripts, messages and admissions. 'hermesq
import' reads it back, into the same or another kind of store. --file writes
the file whole or not at all (a temporary file renamed into place); without
it, or with -, the records go to stdout. The format does not depend on -o.`,
		Example: `  hermesq export --file backup.ndjson
  hermesq export | hermesq --store redis://127.0.0.1:6380/0 import`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := f.Store()
			if err != nil {
				return err
			}
			if err := f.requireAdmin("export"); err != nil {
				return err
			}
			prog := f.progress("exported")
			if (file == "" || file == "-") && f.IO.IsStdoutTTY() {
				prog.on = false // the records themselves go to the terminal
			}
			defer prog.done()
			if file == "" || file == "-" {
				bw := bufio.NewWriter(f.IO.Out)
				if err := exportTo(cmd, st, bw, prog); err != nil {
					return err
				}
				return bw.Flush()
			}
			return writeFileAtomic(file, func(w io.Writer) error { return exportTo(cmd, st, w, prog) })
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "write to this file instead of stdout")
	_ = cmd.MarkFlagFilename("file", "ndjson", "jsonl")
	return cmd
}

func exportTo(cmd *cobra.Command, st backend.Store, w io.Writer, prog *progress) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return st.Export(cmd.Context(), func(r backend.Record) error {
		if r.Session != nil && r.Session.Grants == nil {
			// One form for "no grants" whatever the store: lists are
			// never null (as an admission's identities).
			s := *r.Session
			s.Grants = []backend.Grant{}
			r.Session = &s
		}
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("export: write: %w", err)
		}
		prog.add(1)
		return nil
	})
}

// writeFileAtomic writes path through a temporary file in the same
// directory, synced and renamed into place only when write succeeded.
func writeFileAtomic(path string, write func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return backend.Errorf(backend.ErrInvalid, "export --file %s: %v", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	bw := bufio.NewWriter(tmp)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export --file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("export --file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("export --file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("export --file %s: %w", path, err)
	}
	done = true
	return nil
}

func newImportCmd(f *Factory) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "import [--file F]",
		Short: "Read NDJSON records written by export into the store",
		Long: `Import reads records as 'hermesq export' wrote them (from --file, or stdin)
and writes them keeping ids, seqs, epochs and statuses. Every line is checked
before anything is written: a bad line is reported with its number and
nothing is imported (exit 2). A record already present with the same content
is skipped; with other content the import is refused (exit 4).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.MayCreateStore() // a command that writes may create the store
			p, err := f.printer()
			if err != nil {
				return err
			}
			var src io.Reader = f.IO.In
			if file != "" && file != "-" {
				fh, err := os.Open(file)
				if err != nil {
					return backend.Errorf(backend.ErrInvalid, "import --file: %v", err)
				}
				defer fh.Close()
				src = fh
			}
			prog := f.progress("read")
			recs, lines, err := readRecords(src, prog)
			prog.done()
			if err != nil {
				return err
			}
			// The whole file is checked against the records alone first, so
			// a bad file is refused without opening (or creating) the store.
			if err := checkRecords(cmd.Context(), nil, recs, lines); err != nil {
				return err
			}
			st, err := f.Store()
			if err != nil {
				return err
			}
			if err := f.requireAdmin("import"); err != nil {
				return err
			}
			if len(recs) > 0 {
				if err := checkRecords(cmd.Context(), st, recs, lines); err != nil {
					return err
				}
				if err := st.Import(cmd.Context(), recs); err != nil {
					return err
				}
			}
			out := struct {
				Imported int `json:"imported"`
			}{len(recs)}
			return p.object(out, textf("imported %d records\n", len(recs)))
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "read from this file instead of stdin")
	_ = cmd.MarkFlagFilename("file", "ndjson", "jsonl")
	return cmd
}

// readRecords parses an export strictly, every line before any is written,
// and returns the records with the line number of each. A line is read
// with the bound of a --batch line: a longer one, or one that never ends
// (/dev/zero), is refused once the bound is passed (readLineUpTo).
func readRecords(r io.Reader, prog *progress) ([]backend.Record, []int, error) {
	br := bufio.NewReader(r)
	var recs []backend.Record
	var lines []int
	for n := 1; ; n++ {
		raw, tooLong, err := readLineUpTo(br, maxInputRead)
		if tooLong {
			return nil, nil, backend.Errorf(backend.ErrInvalid, "import: line %d: line longer than %d bytes", n, maxInputRead-1)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("import: read line %d: %w", n, err)
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			rec, perr := backend.DecodeRecord(raw)
			if perr != nil {
				return nil, nil, fmt.Errorf("import: line %d: %w", n, perr)
			}
			recs = append(recs, rec)
			lines = append(lines, n)
			prog.add(1)
		}
		if errors.Is(err, io.EOF) {
			return recs, lines, nil
		}
	}
}

// readLineUpTo reads one line without its newline, at most max bytes: past
// them it stops reading and reports the line too long.
func readLineUpTo(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, true, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), false, err
	}
}

// checkRecords checks the records whole (backend.CheckRecords) and names
// the line of the one refused. st nil: against the records alone, where a
// reference outside them is left to the check against the store.
func checkRecords(ctx context.Context, st backend.Store, recs []backend.Record, lines []int) error {
	var look backend.RecordLookup
	if st != nil {
		look = st
	} else {
		look = absentStore{}
	}
	err := backend.CheckRecords(ctx, look, recs)
	var re *backend.RecordError
	if errors.As(err, &re) {
		if st == nil && errors.Is(err, errNeedsStore) {
			return nil
		}
		return fmt.Errorf("import: line %d: %w", lines[re.Index], re.Err)
	}
	if st == nil && errors.Is(err, errNeedsStore) {
		return nil
	}
	return err
}

// errNeedsStore stops the check against the records alone where it would
// need the store to decide.
var errNeedsStore = errors.New("needs the store")

// absentStore answers every lookup with errNeedsStore.
type absentStore struct{}

func (absentStore) GetSession(context.Context, string, time.Time) (backend.Session, error) {
	return backend.Session{}, errNeedsStore
}
func (absentStore) GetTranscript(context.Context, string) (backend.Transcript, error) {
	return backend.Transcript{}, errNeedsStore
}
func (absentStore) GetAdmission(context.Context, string) (backend.Admission, error) {
	return backend.Admission{}, errNeedsStore
}
