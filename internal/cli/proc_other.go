//go:build !linux

package cli

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// newSession: see proc_linux.go; elsewhere the supervisor only gets its
// own process group where the platform allows.
func newSession(cmd *exec.Cmd) { setsid(cmd) }

// inspectProc: without /proc, the command is unknown and started_at is
// when the watch began.
func inspectProc(pid int) (watchedProc, error) {
	if !alive(pid) {
		return watchedProc{}, fmt.Errorf("proc watch: no running process %d: %w", pid, backend.ErrNotFound)
	}
	return watchedProc{pid: pid, command: []string{"pid " + strconv.Itoa(pid)},
		startedAt: float64(time.Now().UnixMicro()) / 1e6}, nil
}

// waitProc polls until the process is gone.
func waitProc(ctx context.Context, w watchedProc) error {
	for alive(w.pid) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
