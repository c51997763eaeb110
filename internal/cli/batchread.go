package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// alwaysReady is inputReady's answer for input that never waits.
func alwaysReady() bool { return true }

// A batchSink takes readBatch's chunks, in order.
type batchSink interface {
	// commit takes a chunk; it may return with the chunk's store call
	// still running and its results not yet printed.
	commit(chunk []batchLine) error
	// running is closed when the call commit left running has ended; it
	// is nil when none is.
	running() <-chan struct{}
	// finish waits for the call commit left running and prints its results.
	finish() error
}

// readBatch reads NDJSON inputs, one a line, and hands them to the sink in
// chunks (batchChunkLines, batchChunkBytes), and whenever the input pauses:
// a line read with nothing more to read without waiting is committed at
// once, so a producer writing now and then into a pipe sees each line
// admitted without waiting for a chunk to fill. Blank lines are skipped; a
// line that is not one input object is kept with its error.
//
// Reading and parsing run in a goroutine of their own, one chunk ahead of
// commit: while a chunk is committed, the next is parsed, so the two share
// the machine's cores instead of taking turns. Chunks reach the sink in
// order, one at a time; readBatch holds at most two (the one being read,
// the one the sink takes), and the sink what its store call needs of the
// one before. When the sink's last call ends before the next chunk is
// read, its results are printed at once (finish), not when more input
// comes. When the sink stops the batch (errStopBatch: the store failed a
// chunk whole), the chunk read ahead is dropped untried and readBatch
// returns without waiting for the reader, which may be blocked on input
// that never ends; it stops at its next chunk.
func readBatch(r io.Reader, principal string, sink batchSink) error {
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
	stopped := func(err error) error {
		if errors.Is(err, errStopBatch) {
			return nil
		}
		return err
	}
	for {
		var chunk []batchLine
		var ok bool
		select {
		case chunk, ok = <-chunks:
		case <-sink.running():
			if err := sink.finish(); err != nil {
				return stopped(err)
			}
			chunk, ok = <-chunks
		}
		if !ok {
			break
		}
		err := sink.commit(chunk)
		clear(chunk) // drop the inputs: memory stays bounded by a few chunks
		free <- chunk[:0]
		if err != nil {
			return stopped(err)
		}
	}
	if err := sink.finish(); err != nil {
		return stopped(err)
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
		return decodeString(v, dst)
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
		if err := decodeStrings(v, &in.Identities); err != nil {
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
