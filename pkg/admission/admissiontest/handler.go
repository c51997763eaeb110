package admissiontest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// handlerSource is the scenarios' turn handler, built into a real program
// once per test binary. Embedding it (instead of finding it on disk) keeps
// RunScenarios working from any package's tests.
//
//go:embed testdata/handler/main.go
var handlerSource []byte

var (
	buildOnce  sync.Once
	handlerBin string
	buildErr   error
)

// HandlerBinary returns the path of the scenarios' handler program, building
// it on first use. The binary is cached under the temp directory by the hash
// of its source and Go version, so test binaries share one build.
func HandlerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { handlerBin, buildErr = buildHandler() })
	if buildErr != nil {
		t.Fatalf("build the test handler: %v", buildErr)
	}
	return handlerBin
}

func buildHandler() (string, error) {
	sum := sha256.Sum256(append(append([]byte{}, handlerSource...), runtime.Version()...))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("hermesq-test-handler-%d-%s", os.Getuid(), hex.EncodeToString(sum[:8])))
	bin := filepath.Join(dir, "handler")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o100 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "main.go"), handlerSource, 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hermesqtesthandler\n\ngo 1.21\n"), 0o600); err != nil {
		return "", err
	}
	// go test puts its own Go first on the PATH of the tests it runs.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build the test handler: %w", err)
	}
	tmp := filepath.Join(src, "handler")
	cmd := exec.Command(goBin, "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	// Rename is atomic: concurrent test binaries never see half a file.
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}
