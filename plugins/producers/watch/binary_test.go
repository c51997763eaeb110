//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hermesq/hermesq/pkg/producer/producertest"
)

// TestBinaryContract builds the watch producer's binary and runs the SDK's
// producer checks on it, started as the host starts it with its
// configuration in HERMESQ_PRODUCER_CONFIG.
func TestBinaryContract(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "hermesq-producer-watch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	log := filepath.Join(dir, "app.log")
	if err := os.WriteFile(log, []byte("ERROR one\nfine\nERROR two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	producertest.RunBinary(t, bin, []byte(fmt.Sprintf(
		`{"watches":[{"name":"app","path":%q,"pattern":"ERROR","session":"s1","from_start":true}]}`, log)))
}
