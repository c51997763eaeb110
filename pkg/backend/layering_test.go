package backend_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportDirection keeps the layering of the project true: the store
// interface depends on nothing, the contract logic on no store or CLI
// library, and stores never on each other.
func TestImportDirection(t *testing.T) {
	const mod = "github.com/hermesq/hermesq/"
	rules := []struct {
		pkg       string
		forbidden []string
		stdOnly   bool
	}{
		{pkg: "pkg/backend", stdOnly: true},
		// The lock mark and the record reader the bbolt store and the outbox
		// share stand alone.
		{pkg: "pkg/lockwant", forbidden: []string{mod, "go.etcd.io/bbolt"}},
		{pkg: "pkg/recjson", stdOnly: true},
		{pkg: "pkg/admission", forbidden: []string{
			"github.com/spf13/", "go.etcd.io/bbolt", "github.com/redis/", mod + "internal/", mod + "plugins/"}},
		{pkg: "plugins/storage/bbolt", forbidden: []string{mod + "plugins/storage/redis", mod + "internal/", mod + "pkg/admission", "github.com/spf13/"}},
		{pkg: "pkg/producer/...", forbidden: []string{
			mod + "pkg/backend", mod + "pkg/admission", mod + "plugins/storage/", mod + "internal/", "github.com/spf13/", "github.com/redis/"}},
		{pkg: "plugins/producers/...", forbidden: []string{
			mod + "pkg/backend", mod + "pkg/admission", mod + "plugins/storage/", mod + "internal/", "github.com/redis/"}},
		// The plugin transport is linked only where plugins are served or
		// hosted: hermesq itself starts without it (hermesq-producers hosts), nor
		// protocol buffers, whose initialisation reads the executable.
		{pkg: "pkg/producer", forbidden: []string{"github.com/hashicorp/go-plugin", "google.golang.org/grpc"}},
		// Nor top's terminal view (hermesq-top draws it), nor, through the
		// command's options, any terminal library.
		{pkg: "cmd/hermesq", forbidden: []string{"github.com/hashicorp/go-plugin", "google.golang.org/grpc", "google.golang.org/protobuf",
			mod + "internal/top/tui", "github.com/charmbracelet/", "github.com/muesli/termenv"}},
		// The producer host: the contract logic and the SDK (the outbox is
		// bbolt), but no store,
		// no CLI library, and not the plugin transport (a Launcher is
		// handed to it by hermesq-producers).
		{pkg: "internal/producerhost", forbidden: []string{
			mod + "plugins/", mod + "internal/cli", "github.com/spf13/", "github.com/redis/",
			"github.com/hashicorp/go-plugin", "google.golang.org/grpc", "google.golang.org/protobuf"}},
		// What the command line moved out of itself: process supervision,
		// top's terminal UI and the terminal text are internal packages that
		// know no CLI library and no store; the figures are a library a
		// program can import, with nothing internal.
		{pkg: "internal/process", forbidden: []string{
			mod + "internal/", mod + "plugins/", mod + "pkg/admission", "github.com/spf13/", "github.com/redis/", "go.etcd.io/bbolt"}},
		{pkg: "internal/top", forbidden: []string{mod + "internal/cli", mod + "plugins/", "github.com/spf13/", "github.com/redis/", "github.com/charmbracelet/"}},
		{pkg: "internal/top/tui", forbidden: []string{mod + "internal/cli", mod + "plugins/", "github.com/spf13/", "github.com/redis/"}},
		{pkg: "internal/termtext", forbidden: []string{
			mod + "internal/", mod + "plugins/", "github.com/spf13/", "github.com/redis/", "github.com/charmbracelet/"}},
		{pkg: "pkg/stats", forbidden: []string{
			mod + "internal/", mod + "plugins/", "github.com/spf13/", "github.com/redis/", "github.com/charmbracelet/",
			"github.com/hashicorp/go-plugin", "google.golang.org/grpc"}},
		// The CLI hosts producers only through the host package.
		{pkg: "internal/cli", forbidden: []string{"github.com/hashicorp/go-plugin", "google.golang.org/grpc"}},
		// The differential test is handed its stores by its test file:
		// its code depends on no store, nor on the CLI.
		{pkg: "internal/storediff", forbidden: []string{mod + "plugins/", mod + "internal/cli", "github.com/spf13/", "github.com/redis/", "go.etcd.io/bbolt"}},
		{pkg: "plugins/storage/redis", forbidden: []string{mod + "plugins/storage/bbolt", mod + "internal/", mod + "pkg/admission", "github.com/spf13/"}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../../"+r.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", r.pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == mod+r.pkg || strings.HasPrefix(dep, mod+strings.TrimSuffix(r.pkg, "...")) {
				continue
			}
			if r.stdOnly {
				t.Errorf("%s imports %s; it may import only the standard library", r.pkg, dep)
				continue
			}
			for _, f := range r.forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s imports %s (forbidden: %s)", r.pkg, dep, f)
				}
			}
		}
	}
}
