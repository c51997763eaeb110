//go:build !linux

package process

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// newSession: see platform_linux.go; elsewhere the supervisor only gets its
// own process group where the platform allows.
func newSession(cmd *exec.Cmd) { setsid(cmd) }

// Inspect: without /proc, the command is unknown and started_at is
// when the watch began.
func Inspect(pid int) (Watched, error) {
	if !alive(pid) {
		return Watched{}, fmt.Errorf("proc watch: no running process %d: %w", pid, backend.ErrNotFound)
	}
	return Watched{PID: pid, Command: []string{"pid " + strconv.Itoa(pid)},
		StartedAt: float64(time.Now().UnixMicro()) / 1e6}, nil
}

// Wait polls until the process is gone.
func Wait(ctx context.Context, w Watched) error {
	for alive(w.PID) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
