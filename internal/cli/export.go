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
	"strings"
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
import' reads it back, into the same or another kind of store. --file PATH
replaces a regular file (or the regular file a symlink points to, the symlink
kept) whole or not at all: a temporary file beside it, synced and renamed
over it. A FIFO, a device or an open descriptor (/dev/fd/N, /dev/stdout,
>(cmd)) is written into directly, and a write error (/dev/full) is reported
(exit 1). A directory, a socket or anything else is refused (exit 2), never
replaced. Without --file, or with -, the records go to stdout. The format
does not depend on -o.`,
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
			return writeExportFile(file, func(w io.Writer) error { return exportTo(cmd, st, w, prog) })
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

// writeExportFile writes the export to path, by what path names: a
// regular file, or a symlink to one, is replaced atomically (the temporary
// file is written beside the symlink's target and renamed over it, so the
// symlink stays); a path that does not exist is created the same way; a
// FIFO, a device or an open descriptor (/dev/fd/N, /proc/self/fd/N,
// /dev/stdout) is opened and written into, its write errors reported; a
// directory, a socket or anything else is refused, never replaced.
func writeExportFile(path string, write func(w io.Writer) error) error {
	if isDescriptorPath(path) {
		return writeInto(path, write)
	}
	fi, err := os.Stat(path) // through symlinks
	switch {
	case errors.Is(err, os.ErrNotExist):
		if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&os.ModeSymlink != 0 {
			return backend.Errorf(backend.ErrInvalid, "export --file %s: a symlink to nothing: want a regular file, a FIFO or a device", path)
		}
		return writeFileAtomic(path, write)
	case err != nil:
		return backend.Errorf(backend.ErrInvalid, "export --file %s: %v", path, err)
	case fi.Mode().IsRegular():
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return backend.Errorf(backend.ErrInvalid, "export --file %s: %v", path, err)
		}
		return writeFileAtomic(target, write)
	case fi.Mode()&(os.ModeNamedPipe|os.ModeDevice|os.ModeCharDevice) != 0:
		return writeInto(path, write)
	}
	return backend.Errorf(backend.ErrInvalid, "export --file %s: %s: want a regular file (replaced whole), a FIFO or a device (written into); it is left as it is",
		path, fileKind(fi.Mode()))
}

// isDescriptorPath says whether path names an open file descriptor
// (/dev/fd/N, /dev/stdout, /proc/self/fd/N, a shell's >(cmd)), which is
// written into whatever it is: replacing the file behind it would leave the
// descriptor's reader with nothing.
func isDescriptorPath(path string) bool {
	p := filepath.Clean(path)
	for _, prefix := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return p == "/dev/stdout" || p == "/dev/stderr"
}

// fileKind names a mode that export --file refuses.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// writeInto opens path for writing and writes the export into it: a FIFO,
// a device, a descriptor. Appending, so a descriptor on a regular file
// opened with >> keeps what it holds; a write error is the command's (exit 1).
func writeInto(path string, write func(w io.Writer) error) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return backend.Errorf(backend.ErrInvalid, "export --file %s: %v", path, err)
	}
	bw := bufio.NewWriter(fh)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export --file %s: %w", path, err)
	}
	return nil
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
nothing is imported (exit 2); so is a file that would leave a loop in a
lineage (a transcript its own parent or child, or a chain that comes back).
A record already present with the same content is skipped; with other
content the import is refused before anything is written (exit 4). It says
how many records it wrote and how many were there already.`,
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
			var res backend.ImportResult
			if len(recs) > 0 {
				if err := checkRecords(cmd.Context(), st, recs, lines); err != nil {
					return err
				}
				if res, err = st.Import(cmd.Context(), recs); err != nil {
					var re *backend.RecordError
					if errors.As(err, &re) && re.Index >= 0 && re.Index < len(lines) {
						return fmt.Errorf("import: line %d: %w", lines[re.Index], re.Err)
					}
					return err
				}
			}
			out := struct {
				Imported int `json:"imported"`
				Present  int `json:"present"`
			}{res.Written, res.Present}
			return p.object(out, textf("imported %d records, %d already there\n", res.Written, res.Present))
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
