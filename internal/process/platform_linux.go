package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesq/hermesq/pkg/backend"
)

// clockTicks is the kernel's USER_HZ, the unit of a process's start time
// in /proc/PID/stat: 100 on every Linux architecture Go supports.
const clockTicks = 100

// newSession makes cmd the leader of a new session, without a controlling
// terminal: it outlives the calling shell and its terminal.
func newSession(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// Inspect reads a running process's command line and start time.
func Inspect(pid int) (Watched, error) {
	w := Watched{PID: pid}
	tick, state, err := procStat(pid)
	if err != nil || state == "Z" {
		return w, fmt.Errorf("proc watch: no running process %d: %w", pid, backend.ErrNotFound)
	}
	w.startTick = tick
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err == nil && len(raw) > 0 {
		w.Command = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	} else if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil {
		w.Command = []string{strings.TrimSpace(string(comm))}
	} else {
		w.Command = []string{"pid " + strconv.Itoa(pid)}
	}
	ticks, err := strconv.ParseFloat(tick, 64)
	if err != nil {
		return w, fmt.Errorf("proc watch: start time of %d: %w", pid, err)
	}
	boot, err := bootTime()
	if err != nil {
		return w, err
	}
	w.StartedAt = boot + ticks/clockTicks
	return w, nil
}

// procStat returns the start time (field 22) and state (field 3) of a
// process from /proc/PID/stat.
func procStat(pid int) (start, state string, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces and parentheses
	if i < 0 {
		return "", "", fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", "", fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	return f[19], f[0], nil
}

func bootTime() (float64, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("proc watch: boot time: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, errors.New("proc watch: boot time: no btime in /proc/stat")
}

// Wait returns when the process has ended: a pidfd becomes readable
// then; without pidfds (kernels before 5.3) /proc is polled, and a zombie
// or a pid reused by a process started later counts as ended.
func Wait(ctx context.Context, w Watched) error {
	fd, err := unix.PidfdOpen(w.PID, 0)
	if err == nil {
		defer unix.Close(fd)
		// The pidfd names this process; if the pid was reused between
		// Inspect and here, the start time tells.
		if tick, _, err := procStat(w.PID); err != nil || tick != w.startTick {
			return nil
		}
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 500)
			if err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("proc watch: wait for %d: %w", w.PID, err)
			}
			if n > 0 {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	for {
		tick, state, err := procStat(w.PID)
		if err != nil || state == "Z" || tick != w.startTick {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
