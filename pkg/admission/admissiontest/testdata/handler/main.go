// Command handler is the turn handler the admission scenarios run: a real
// process that reads its turn input on stdin and replies
// "reply to <text> notes_seen=<n>" on stdout. Environment switches:
//
//	HQT_RECORD=FILE     append one JSON line per invocation (before anything else)
//	HQT_FAIL_ON=SUBSTR  fail (stderr "boom: <text>", exit HQT_FAIL_CODE or 3) when the text contains SUBSTR
//	HQT_SLEEP=DURATION  sleep before replying (stderr "sleeping <d>")
//	HQT_WAIT=FILE       wait until FILE exists before replying
//	HQT_BIG=N           reply with N bytes of "x" instead
//	HQT_CHILD=FILE      start a child process that sleeps forever (in the handler's process
//	                    group, holding its stdout) and write the child's pid to FILE
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

type turnInput struct {
	Admission struct {
		ID string `json:"id"`
	} `json:"admission"`
	Session      string `json:"session"`
	Target       string `json:"target"`
	Text         string `json:"text"`
	NotesSeen    int    `json:"notes_seen"`
	MessageCount int    `json:"message_count"`
}

type record struct {
	Admission    string            `json:"admission"`
	Session      string            `json:"session"`
	Target       string            `json:"target"`
	Text         string            `json:"text"`
	NotesSeen    int               `json:"notes_seen"`
	MessageCount int               `json:"message_count"`
	Env          map[string]string `json:"env"`
}

func main() {
	if os.Getenv("HQT_ROLE") == "child" {
		for {
			time.Sleep(time.Hour)
		}
	}
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read stdin:", err)
		os.Exit(10)
	}
	var in turnInput
	if err := json.Unmarshal(raw, &in); err != nil {
		fmt.Fprintln(os.Stderr, "decode turn input:", err)
		os.Exit(11)
	}
	if path := os.Getenv("HQT_RECORD"); path != "" {
		rec := record{Admission: in.Admission.ID, Session: in.Session, Target: in.Target, Text: in.Text,
			NotesSeen: in.NotesSeen, MessageCount: in.MessageCount, Env: map[string]string{}}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "HERMESQ_") {
				rec.Env[k] = v
			}
		}
		line, _ := json.Marshal(rec)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "record:", err)
			os.Exit(12)
		}
		if _, err := f.Write(append(line, '\n')); err != nil {
			fmt.Fprintln(os.Stderr, "record:", err)
			os.Exit(12)
		}
		f.Close()
	}
	if sub := os.Getenv("HQT_FAIL_ON"); sub != "" && strings.Contains(in.Text, sub) {
		code := 3
		if c, err := strconv.Atoi(os.Getenv("HQT_FAIL_CODE")); err == nil {
			code = c
		}
		fmt.Fprintln(os.Stderr, "boom: "+in.Text)
		os.Exit(code)
	}
	if path := os.Getenv("HQT_CHILD"); path != "" {
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "HQT_ROLE=child")
		child.Stdout = os.Stdout
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "start child:", err)
			os.Exit(13)
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(child.Process.Pid)), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "child pid:", err)
			os.Exit(13)
		}
	}
	if d, err := time.ParseDuration(os.Getenv("HQT_SLEEP")); err == nil {
		fmt.Fprintf(os.Stderr, "sleeping %s\n", d)
		time.Sleep(d)
	}
	if path := os.Getenv("HQT_WAIT"); path != "" {
		for {
			if _, err := os.Stat(path); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("HQT_BIG")); err == nil {
		os.Stdout.Write([]byte(strings.Repeat("x", n)))
		return
	}
	fmt.Printf("reply to %s notes_seen=%d\n", in.Text, in.NotesSeen)
}
