//go:build unix

package main

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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermesq/hermesq/pkg/producer"
)

// Event kinds, the first element of a watch event's identity.
const (
	kindMatch    = "watch_match"
	kindDisabled = "watch_disabled"
)

// Reasons a watch stops, in its watch_disabled event.
const (
	reasonGone       = "file gone"
	reasonRate       = "rate exceeded"
	reasonDisabled   = "disabled in config"
	reasonNotRegular = "not a regular file"
)

// maxLine bounds one line of a watched file (without its newline). A longer
// line is never matched: it is skipped to its newline, however long it grows
// and however many scans that takes, and counted (the positions file's
// skipped) and logged, so a line cut short can never make a false match and
// a line that never ends never holds back the lines after it.
const maxLine = 64 << 10

// checkpointBytes is how much of a file a scan reads between two saves of
// the positions (and checks of its context).
const checkpointBytes = 8 << 20

// Config is the watch producer's configuration: the JSON object the host
// gives it (hermesq's config key producers.watch).
type Config struct {
	Watches []WatchConfig `json:"watches"`
}

// WatchConfig is one watch.
type WatchConfig struct {
	Name      string `json:"name"`       // names the watch in identities and texts: [A-Za-z0-9._:@/+-]
	Path      string `json:"path"`       // an absolute file path
	Pattern   string `json:"pattern"`    // a Go regular expression a line must match
	Session   string `json:"session"`    // the session its events go to
	Target    string `json:"target"`     // the transcript they are pinned to ("": the session's current)
	Rate      string `json:"rate"`       // at most N matches in a window, "N/DURATION" (e.g. 20/1m); "": no limit
	FromStart bool   `json:"from_start"` // read a file first seen from its start (default: from its end, as tail -f)
	Disabled  bool   `json:"disabled"`   // the watch is off: one watch_disabled event, then nothing
}

// watch is a configured watch, checked.
type watch struct {
	WatchConfig
	re     *regexp.Regexp
	max    int           // rate: matches allowed per window (0: no limit)
	window time.Duration // rate window
}

// parseConfig checks a configuration whole: a bad watch refuses the lot
// (the plugin does not start), so a typo never silently watches nothing.
func parseConfig(raw []byte) ([]watch, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("watch: config: %v", err)
	}
	seen := map[string]bool{}
	out := make([]watch, 0, len(c.Watches))
	for i, wc := range c.Watches {
		w := watch{WatchConfig: wc}
		where := fmt.Sprintf("watch: config: watches[%d]", i)
		if !validName(wc.Name) {
			return nil, fmt.Errorf("%s: name %q: want 1-64 characters of [A-Za-z0-9._:@/+-]", where, wc.Name)
		}
		where = fmt.Sprintf("watch: config: watch %s", wc.Name)
		if seen[wc.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		seen[wc.Name] = true
		if !filepath.IsAbs(wc.Path) {
			return nil, fmt.Errorf("%s: path %q is not absolute", where, wc.Path)
		}
		if err := checkRegular(wc.Path); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		if wc.Session == "" {
			return nil, fmt.Errorf("%s: session is empty", where)
		}
		if wc.Pattern == "" {
			return nil, fmt.Errorf("%s: pattern is empty", where)
		}
		re, err := regexp.Compile(wc.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%s: pattern: %v", where, err)
		}
		w.re = re
		if wc.Rate != "" {
			n, d, ok := strings.Cut(wc.Rate, "/")
			max, err1 := strconv.Atoi(n)
			window, err2 := time.ParseDuration(d)
			if !ok || err1 != nil || err2 != nil || max < 1 || window <= 0 {
				return nil, fmt.Errorf("%s: rate %q: want N/DURATION with N ≥ 1, e.g. 20/1m", where, wc.Rate)
			}
			w.max, w.window = max, window
		}
		out = append(out, w)
	}
	return out, nil
}

// checkRegular refuses a path that names something other than a regular
// file (a FIFO, a device, a folder, a socket): reading it could block or
// never end. A path that does not exist yet is fine: the watch waits for
// nothing and stops as "file gone" at its first scan. Stat never opens the
// file, so it never blocks on a FIFO.
func checkRegular(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("path %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("path %s is %s, not a regular file: a watch reads a regular file (a log)", path, fileKind(fi.Mode()))
	}
	return nil
}

// fileKind names a file mode's type.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("._:@/+-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// position is where a watch stands in its file, kept durably so that a
// restarted plugin goes on where it was and reports no line twice.
type position struct {
	Inode    uint64 `json:"inode"`
	Gen      int    `json:"gen,omitempty"`       // times the file was truncated or replaced under the watch
	Offset   int64  `json:"offset"`              // the start of the first line not read yet
	Stopped  string `json:"stopped,omitempty"`   // why the watch stopped ("": it runs)
	Window   int64  `json:"window,omitempty"`    // rate window start, unix ns
	InWindow int    `json:"in_window,omitempty"` // matches counted in that window
	// Skipping is set while Offset stands inside a line longer than
	// maxLine: what comes up to its newline is skipped, not matched.
	Skipping bool `json:"skipping,omitempty"`
	Skipped  int  `json:"skipped,omitempty"` // lines skipped as longer than maxLine
}

// at names the place of a line in the watched file: the file's inode, how
// many times it was truncated or replaced, and the line's offset. It is what
// makes a line's event identity, the same however often the line is read.
func (p *position) at(offset int64) string {
	return fmt.Sprintf("%d-%d:%d", p.Inode, p.Gen, offset)
}

// Watcher runs the configured watches: each scan reads what was appended
// to each file since its position, adds an outbox event per matching line
// (and one watch_disabled event when a watch stops), then saves the
// positions. An event's identity is derived from where its line stands in
// the file, so a scan repeated after a crash adds nothing twice (the outbox
// keeps the first event of an identity).
type Watcher struct {
	watches []watch
	outbox  *producer.Outbox
	state   string // positions file
	now     func() time.Time

	mu    sync.Mutex
	pos   map[string]*position
	saved []byte // the positions as last saved
}

// stateFile is the positions file in the plugin's state folder.
const stateFile = "watch-positions.json"

// NewWatcher loads the positions kept in dir.
func NewWatcher(watches []watch, ob *producer.Outbox, dir string) (*Watcher, error) {
	w := &Watcher{watches: watches, outbox: ob, state: filepath.Join(dir, stateFile), now: time.Now, pos: map[string]*position{}}
	b, err := os.ReadFile(w.state)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("watch: read positions: %w", err)
	default:
		if err := json.Unmarshal(b, &w.pos); err != nil {
			return nil, fmt.Errorf("watch: positions file %s is damaged (%v): remove it to start the watches afresh", w.state, err)
		}
	}
	return w, nil
}

// Scan runs every watch once.
func (w *Watcher) Scan(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for i := range w.watches {
		if err := w.scanOne(ctx, &w.watches[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := w.save(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (w *Watcher) scanOne(ctx context.Context, wt *watch) error {
	p := w.pos[wt.Name]
	if p == nil {
		p = &position{}
	}
	if p.Stopped != "" {
		return nil
	}
	if wt.Disabled {
		return w.stop(ctx, wt, p, reasonDisabled, "")
	}
	// O_NONBLOCK: a path replaced by a FIFO since the configuration was
	// checked must not block the scan (an open for reading would wait for
	// a writer); it is found out by the Stat below and the watch stops.
	f, err := os.OpenFile(wt.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return w.stop(ctx, wt, p, reasonGone, p.at(p.Offset))
	}
	if err != nil {
		return fmt.Errorf("watch %s: %w", wt.Name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("watch %s: %w", wt.Name, err)
	}
	if !fi.Mode().IsRegular() {
		return w.stop(ctx, wt, p, reasonNotRegular, p.at(p.Offset))
	}
	ino := inode(fi)
	switch {
	case w.pos[wt.Name] == nil:
		// First sight: from the end (tail -f), or the start if asked.
		p.Inode = ino
		if !wt.FromStart {
			p.Offset = fi.Size()
		}
		w.pos[wt.Name] = p
	case ino != p.Inode || fi.Size() < p.Offset:
		// Replaced or truncated: a new file, read from its start; its
		// lines are new events even where they stand where old ones did.
		p.Inode, p.Offset, p.Skipping = ino, 0, false
		p.Gen++
	}
	if fi.Size() == p.Offset {
		return nil
	}
	if _, err := f.Seek(p.Offset, io.SeekStart); err != nil {
		return fmt.Errorf("watch %s: %w", wt.Name, err)
	}
	// Read up to the size seen above (what is appended meanwhile waits
	// for the next scan), a line at a time, never more than a line of
	// maxLine and its "\r\n" in memory.
	r := bufio.NewReaderSize(io.LimitReader(f, fi.Size()-p.Offset), maxLine+2)
	checkpoint := p.Offset
	for {
		if p.Offset-checkpoint >= checkpointBytes {
			// A long read keeps what it did: the positions are saved, and a
			// poll whose deadline passed stops here and goes on next time.
			checkpoint = p.Offset
			if err := w.save(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("watch %s: %w", wt.Name, err)
			}
		}
		chunk, err := r.ReadSlice('\n')
		at := p.Offset
		switch {
		case err == nil && p.Skipping:
			// The newline ending a skipped line: the next line starts after it.
			p.Offset += int64(len(chunk))
			p.Skipping = false
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			// Longer than maxLine with no newline yet: skip it.
			if !p.Skipping {
				w.skipped(wt, p, at)
			}
			p.Offset += int64(len(chunk))
			p.Skipping = true
			continue
		case errors.Is(err, io.EOF):
			if p.Skipping {
				p.Offset += int64(len(chunk)) // still inside the long line
			}
			// Else a line still being written: read it whole next time.
			return nil
		case err != nil:
			return fmt.Errorf("watch %s: %w", wt.Name, err)
		}
		p.Offset += int64(len(chunk))
		line := bytes.TrimSuffix(bytes.TrimSuffix(chunk, []byte("\n")), []byte("\r"))
		if len(line) > maxLine {
			w.skipped(wt, p, at)
			continue
		}
		if !wt.re.Match(line) {
			continue
		}
		if wt.max > 0 {
			now := w.now().UnixNano()
			if p.Window == 0 || now-p.Window >= int64(wt.window) {
				p.Window, p.InWindow = now, 0
			}
			p.InWindow++
			if p.InWindow > wt.max {
				return w.stop(ctx, wt, p, reasonRate, p.at(at))
			}
		}
		text := fmt.Sprintf("[watch] %s: %s", wt.Name, strings.ToValidUTF8(string(line), "\uFFFD"))
		if err := w.add(ctx, wt, kindMatch, p.at(at), text); err != nil {
			p.Offset = at // not recorded: read this line again next scan
			return err
		}
	}
}

// skipped counts and logs a line at offset at skipped as longer than
// maxLine.
func (w *Watcher) skipped(wt *watch, p *position, at int64) {
	p.Skipped++
	producer.Logger().Printf("watch %s: the line at %s is longer than %d bytes: skipped to its newline, not matched (%d lines skipped so far)",
		wt.Name, p.at(at), maxLine, p.Skipped)
}

// stop ends a watch with one watch_disabled event.
func (w *Watcher) stop(ctx context.Context, wt *watch, p *position, reason, at string) error {
	text := fmt.Sprintf("[watch] %s disabled: %s", wt.Name, reason)
	switch reason {
	case reasonGone:
		text += " (" + wt.Path + ")"
	case reasonRate:
		text += fmt.Sprintf(" (more than %d matches in %s)", wt.max, wt.window)
	case reasonNotRegular:
		text += " (" + wt.Path + ")"
	}
	id := reason
	if at != "" {
		id += "@" + at
	}
	if err := w.add(ctx, wt, kindDisabled, id, text); err != nil {
		return err
	}
	p.Stopped = reason
	w.pos[wt.Name] = p
	return nil
}

func (w *Watcher) add(ctx context.Context, wt *watch, kind, eventID, text string) error {
	ident, _ := json.Marshal([]string{kind, wt.Name, eventID})
	_, err := w.outbox.Add(ctx, producer.Event{Session: wt.Session, Target: wt.Target, Identity: string(ident), Text: text})
	if err != nil {
		return fmt.Errorf("watch %s: %w", wt.Name, err)
	}
	return nil
}

// save writes the positions atomically (a temporary file renamed over).
func (w *Watcher) save() error {
	b, err := json.Marshal(w.pos)
	if err != nil {
		return err
	}
	if bytes.Equal(b, w.saved) {
		return nil
	}
	tmp := w.state + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("watch: save positions: %w", err)
	}
	if err := os.Rename(tmp, w.state); err != nil {
		return fmt.Errorf("watch: save positions: %w", err)
	}
	w.saved = b
	return nil
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
