//go:build unix

package admissiontest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processGone reports whether the process is dead: no such process, or a
// zombie nobody has reaped yet (a container's init may never reap it).
func processGone(pid string) bool {
	n, err := strconv.Atoi(strings.TrimSpace(pid))
	if err != nil || n <= 0 {
		return false
	}
	if err := syscall.Kill(n, 0); err == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}
