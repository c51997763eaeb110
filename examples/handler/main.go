// Command handler is an example hermesq turn handler.
//
// hermesq runs it for each turn with the turn input as JSON on stdin
// ({"admission","session","target","text","notes_seen","message_count"}) and
// takes what it prints on stdout as the reply:
//
//	echo: <text> (notes seen: N)
//
// Environment, for demos and tests:
//
//	HERMESQ_EXAMPLE_SLEEP=D   sleep for the Go duration D first (e.g. 2s)
//	HERMESQ_EXAMPLE_FAIL=1    print a message on stderr and exit 3 (a failed turn)
//	HERMESQ_EXAMPLE_LOG=FILE  append one JSON line per invocation to FILE: the
//	                          turn input plus "handler":{"pid","ppid","gppid",
//	                          "started_at","ended_at"} (times in Unix nanoseconds;
//	                          ppid, the parent, read at start: on Linux hermesq's
//	                          handler supervisor, whose parent gppid is the
//	                          drainer; elsewhere the drainer), written before the reply
//	HERMESQ_EXAMPLE_EXCLUSIVE=DIR  hold an exclusive lock on DIR/<session>.lock while
//	                          running; if another handler of the session holds it,
//	                          append a line to DIR/overlaps (two handlers of one
//	                          session must never run at once)
//
// Usage: hermesq drain SESSION -- handler
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// turnInput is the part of hermesq's turn input this handler reads.
type turnInput struct {
	Session   string `json:"session"`
	Target    string `json:"target"`
	Text      string `json:"text"`
	NotesSeen int    `json:"notes_seen"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "handler: %v\n", err)
		os.Exit(3)
	}
}

func run() error {
	started, ppid := time.Now(), os.Getppid()
	gppid := parentOf(ppid)
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fmt.Errorf("read turn input: %w", err)
	}
	var in turnInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("turn input is not JSON: %w", err)
	}
	if dir := os.Getenv("HERMESQ_EXAMPLE_EXCLUSIVE"); dir != "" {
		if err := exclusive(dir, in.Session); err != nil {
			return err
		}
	}
	if d := os.Getenv("HERMESQ_EXAMPLE_SLEEP"); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("HERMESQ_EXAMPLE_SLEEP: %w", err)
		}
		time.Sleep(dur)
	}
	if f := os.Getenv("HERMESQ_EXAMPLE_LOG"); f != "" {
		if err := logInvocation(f, raw, started, ppid, gppid); err != nil {
			return err
		}
	}
	if os.Getenv("HERMESQ_EXAMPLE_FAIL") == "1" {
		return fmt.Errorf("failing on purpose (HERMESQ_EXAMPLE_FAIL=1) for %q", in.Text)
	}
	// No trailing newline: the reply is exactly this line.
	_, err = fmt.Printf("echo: %s (notes seen: %d)", in.Text, in.NotesSeen)
	return err
}

// logInvocation appends the turn input, with this invocation's pid and times,
// as one line to file. One write of one line: lines of concurrent handlers do
// not interleave (O_APPEND).
func logInvocation(file string, raw []byte, started time.Time, ppid, gppid int) error {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	obj["handler"] = map[string]any{
		"pid":        os.Getpid(),
		"ppid":       ppid,
		"gppid":      gppid,
		"started_at": started.UnixNano(),
		"ended_at":   time.Now().UnixNano(),
	}
	var line bytes.Buffer
	if err := json.NewEncoder(&line).Encode(obj); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("HERMESQ_EXAMPLE_LOG: %w", err)
	}
	if _, err := f.Write(line.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("HERMESQ_EXAMPLE_LOG: %w", err)
	}
	return f.Close()
}

// exclusive takes the session's lock in dir for the life of this process
// (the kernel drops it when the process ends, killed or not); when another
// handler holds it, that overlap is recorded in dir/overlaps.
func exclusive(dir, session string) error {
	held, err := lockSession(filepath.Join(dir, session+".lock"))
	if err != nil {
		return fmt.Errorf("HERMESQ_EXAMPLE_EXCLUSIVE: %w", err)
	}
	if held {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "overlaps"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("HERMESQ_EXAMPLE_EXCLUSIVE: %w", err)
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "session %s: handler %d started while another ran\n", session, os.Getpid())
	return err
}

// parentOf returns the parent of process pid as Linux's /proc shows it; 0
// where it cannot be read.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …: the fields after the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}
