package producerhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// lineLog writes plugin output and host diagnostics to stderr, one line
// at a time, each prefixed with "hermesq: producer NAME: " and with control
// characters escaped.
type lineLog struct {
	mu  sync.Mutex
	out io.Writer
}

func (l *lineLog) printf(name, format string, args ...any) {
	l.line(name, fmt.Sprintf(format, args...))
}

func (l *lineLog) line(name, s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "hermesq: producer %s: %s\n", name, EscapeControl(s))
}

// writer returns a writer that logs each line written to it.
func (l *lineLog) writer(name string) *prefixWriter {
	return &prefixWriter{log: l, name: name}
}

// tailLines is how many of a plugin's last output lines are kept, to be
// shown when it exits before the handshake.
const tailLines = 3

type prefixWriter struct {
	log  *lineLog
	name string
	mu   sync.Mutex
	buf  bytes.Buffer
	tail []string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.buf.Next(i+1)), "\r\n")
		w.emit(line)
	}
	if w.buf.Len() > 64<<10 { // a very long line: log it in pieces
		w.emit(w.buf.String())
		w.buf.Reset()
	}
	return len(b), nil
}

func (w *prefixWriter) emit(line string) {
	line, ok := renderLogLine(line)
	if !ok {
		return
	}
	w.log.line(w.name, line)
	if strings.Contains(line, "] go-plugin") { // the transport's own line, not the plugin's
		return
	}
	w.tail = append(w.tail, line)
	if len(w.tail) > tailLines {
		w.tail = w.tail[1:]
	}
}

// last returns the last lines written (at most tailLines), joined by
// " | ", and forgets them.
func (w *prefixWriter) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 0 {
		w.emit(w.buf.String())
		w.buf.Reset()
	}
	s := strings.Join(w.tail, " | ")
	w.tail = nil
	return EscapeControl(s)
}

// renderLogLine turns a JSON log line of hclog (go-plugin's logger in a
// plugin) into "level: message key=value…", and hides its trace and debug
// lines; other lines are kept as they are. Empty lines are dropped.
func renderLogLine(line string) (string, bool) {
	if strings.TrimSpace(line) == "" {
		return "", false
	}
	if !strings.HasPrefix(line, "{") {
		return line, true
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return line, true
	}
	level, _ := m["@level"].(string)
	msg, ok := m["@message"].(string)
	if !ok {
		return line, true
	}
	if level == "trace" || level == "debug" {
		return "", false
	}
	var b strings.Builder
	b.WriteString(level + ": " + msg)
	keys := make([]string, 0, len(m))
	for k := range m {
		if !strings.HasPrefix(k, "@") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, m[k])
	}
	return b.String(), true
}

func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > 0 {
		w.emit(w.buf.String())
		w.buf.Reset()
	}
}

// EscapeControl writes control characters as Go escapes, so a plugin's
// output cannot drive the operator's terminal.
func EscapeControl(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// oneLine puts s on one line.
func oneLine(s string) string {
	s = strings.TrimRight(s, "\r\n")
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
