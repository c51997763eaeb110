package process

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Detach re-executes the running command in a new session (a supervisor
// that outlives the calling shell and its terminal) with --detached instead
// of --detach, waits for it to report that it started (or why not) on a
// pipe, and returns the supervisor's pid and what it reported. what names
// the command in errors ("proc run").
func Detach(what string) (pid int, status string, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, "", fmt.Errorf("%s --detach: find own executable: %w", what, err)
	}
	args := make([]string, 0, len(os.Args))
	dash := false
	for _, a := range os.Args[1:] {
		if a == "--" {
			dash = true
		}
		if !dash && (a == "--detach" || a == "--detach=true") {
			a = "--detached"
		}
		args = append(args, a)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return 0, "", err
	}
	defer devnull.Close()
	cmd := exec.Command(self, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{w} // fd 3: the supervisor's report
	newSession(cmd)
	if err := cmd.Start(); err != nil {
		w.Close()
		return 0, "", fmt.Errorf("%s --detach: start supervisor: %w", what, err)
	}
	w.Close()
	pid = cmd.Process.Pid
	_ = cmd.Process.Release()
	line, _ := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	line = strings.TrimSpace(line)
	msg, ok := strings.CutPrefix(line, "ok ")
	if !ok {
		if line == "" {
			line = "the supervisor ended without a report"
		}
		// The supervisor's error as it said it, without the command name
		// and the code it carried, which are said here once.
		detail := strings.TrimPrefix(strings.TrimPrefix(line, "error "), what+": ")
		detail = strings.TrimSuffix(detail, ": "+backend.ErrInvalid.Error())
		return 0, "", fmt.Errorf("%s --detach: %s: %w", what, detail, backend.ErrInvalid)
	}
	return pid, msg, nil
}

// ReportDetached tells the waiting Detach (fd 3) how the start went, once,
// on one line: Detach reads up to the first newline.
func ReportDetached(ok bool, msg string) {
	f := os.NewFile(3, "report")
	if f == nil {
		return
	}
	prefix := "ok "
	if !ok {
		prefix = "error "
	}
	msg = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(strings.TrimRight(msg, "\r\n"))
	_, _ = fmt.Fprintf(f, "%s%s\n", prefix, msg)
	_ = f.Close()
}
