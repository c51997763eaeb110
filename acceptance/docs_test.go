package acceptance

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// repoFiles lists the repository's tracked files (and the new ones not yet
// ignored), relative to its root.
func repoFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", f)); err == nil {
			files = append(files, f)
		}
	}
	return files
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsStayInsideRepository is issue 9, acceptance 5: every link in the
// README and docs/ resolves to a file of the repository (or is a web URL),
// and no file of the project points at a contract or folder outside it.
func TestDocsStayInsideRepository(t *testing.T) {
	files := repoFiles(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, f := range files {
		if f == "README.md" || (strings.HasPrefix(f, "docs/") && strings.HasSuffix(f, ".md")) {
			docs = append(docs, f)
		}
	}
	if len(docs) < 2 {
		t.Fatalf("docs %v: want README.md and docs/*.md", docs)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "](docs/contract.md)") {
		t.Error("README does not link docs/contract.md")
	}
	for _, f := range docs {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			link := m[1]
			if strings.HasPrefix(link, "https://") || strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "#") {
				continue
			}
			link, _, _ = strings.Cut(link, "#")
			if filepath.IsAbs(link) {
				t.Errorf("%s links to the absolute path %s", f, link)
				continue
			}
			target := filepath.Clean(filepath.Join(root, filepath.Dir(f), link))
			if rel, err := filepath.Rel(root, target); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links to %s, outside the repository", f, link)
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, link)
			}
		}
	}
	outside := regexp.MustCompile(`DESIGN\.md|DESIGN §|\.\./shared|/work/shared|shared[ ]folder`)
	for _, f := range files {
		if strings.HasPrefix(f, "acceptance/docs_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			continue // unreadable or binary
		}
		for i, line := range strings.Split(string(data), "\n") {
			if loc := outside.FindString(line); loc != "" {
				t.Errorf("%s:%d points outside the repository (%q): %s", f, i+1, loc, strings.TrimSpace(line))
			}
		}
	}
}

// TestInstallFromClone is issue 9, acceptance 5: in a fresh copy of the
// repository, `go install ./cmd/...` puts hermesq, hermesq-producers and hermesq-top on
// PATH; hermesq's --version and version exit 0 and name the Go version, its
// producers run reaches hermesq-producers; then the README's demo command,
// `bash examples/demo.sh`, works.
func TestInstallFromClone(t *testing.T) {
	if testing.Short() {
		t.Skip("copies the repository and builds; -short skips it")
	}
	clone := filepath.Join(t.TempDir(), "hermesq")
	for _, f := range repoFiles(t) {
		data, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(clone, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	gobin := filepath.Join(t.TempDir(), "bin")
	env := []string{"GOBIN=" + gobin, "TMPDIR=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERMESQ_") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "GOBIN=") ||
			strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+gobin+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := func(name string, args ...string) string {
		t.Helper()
		if name == "hermesq" {
			name = filepath.Join(gobin, name) // exec looks names up in the test's own PATH
		}
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = clone, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("go", "install", "./cmd/...")
	for _, bin := range []string{"hermesq", "hermesq-producers", "hermesq-top"} {
		if _, err := os.Stat(filepath.Join(gobin, bin)); err != nil {
			t.Fatalf("go install ./cmd/... put no %s in GOBIN: %v", bin, err)
		}
	}
	v := run("hermesq", "--version")
	if !strings.HasPrefix(v, "hermesq ") || !strings.Contains(v, runtime.Version()) || strings.Count(v, "\n") != 1 {
		t.Errorf("hermesq --version: %q", v)
	}
	if got := run("hermesq", "version"); got != v {
		t.Errorf("hermesq version %q differs from --version %q", got, v)
	}
	var js struct{ Version, Commit, Go string }
	if err := json.Unmarshal([]byte(run("hermesq", "version", "-o", "json")), &js); err != nil || js.Version == "" || js.Commit == "" || js.Go != runtime.Version() {
		t.Errorf("hermesq version -o json: %+v, %v", js, err)
	}
	// hermesq hands producers run to the hermesq-producers installed beside
	// it (here with no plugins to run).
	plugins, store := t.TempDir(), "bbolt://"+filepath.Join(t.TempDir(), "h.db")
	run("hermesq", "session", "open", "s1", "--store", store)
	if got := run("hermesq", "producers", "run", "--once", "--plugin-dir", plugins, "--store", store); !strings.Contains(got, "no producer plugins in "+plugins) {
		t.Errorf("hermesq producers run --once with no plugins: %q", got)
	}
	out := run("bash", "examples/demo.sh")
	for _, want := range []string{"turn ", "note ", "echo: hello: is the build green? (notes seen: 0)", "duplicate "} {
		if !strings.Contains(out, want) {
			t.Errorf("demo in the clone lacks %q:\n%s", want, out)
		}
	}
}

// TestReadmeIsAFrontDoor is issue 25, acceptance 4: the README stays short
// (under 250 lines), opens with its two commands (the demo on the default
// bbolt store, then the tests), and links every page of docs/, so that each
// section moved out of it is reachable from it.
func TestReadmeIsAFrontDoor(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	if n := strings.Count(readme, "\n"); n >= 250 {
		t.Errorf("README.md has %d lines, want under 250: move the detail to a page of docs/", n)
	}
	// The first fenced block holds the two commands, in this order.
	_, rest, ok := strings.Cut(readme, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no ```sh block")
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	if want := []string{"bash examples/demo.sh", "bash scripts/test.sh"}; strings.Join(cmds, "|") != strings.Join(want, "|") {
		t.Errorf("README.md's first commands are %q, want %q", cmds, want)
	}
	sections := strings.Split(readme, "\n## ")
	if len(sections) < 3 || !strings.Contains(sections[1], "```sh\n") {
		t.Errorf("README.md's two commands are not in its first section")
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(readme, -1) {
		link, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(link)] = true
	}
	pages := 0
	for _, f := range repoFiles(t) {
		if strings.HasPrefix(f, "docs/") && strings.HasSuffix(f, ".md") {
			pages++
			if !linked[f] {
				t.Errorf("README.md does not link %s", f)
			}
		}
	}
	if pages < 2 {
		t.Errorf("%d pages in docs/, want the contract and the pages moved out of the README", pages)
	}
}

// repoPath is a span in backquotes that names a file or folder of the
// repository: a relative path of plain characters with a slash in it, or a
// file name with a source or document extension (`pkg/producer/...` names
// the folder pkg/producer).
var repoPath = regexp.MustCompile("`((?:[A-Za-z0-9_.@-]+/)+[A-Za-z0-9_.@-]*(?:/\\.\\.\\.)?|[A-Za-z0-9_.@-]+\\.(?:go|lua|md|sh))`")

// TestArchitecturePathsExist is issue 25: every repository path that
// docs/architecture.md names in backquotes exists, so the map of the code
// stays true when files move; and its table of rules has a row for every
// section of the contract.
func TestArchitecturePathsExist(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, m := range repoPath.FindAllStringSubmatch(string(data), -1) {
		paths[strings.TrimSuffix(m[1], "/...")] = true
	}
	if len(paths) < 50 {
		t.Fatalf("docs/architecture.md names %d repository paths, want the files of every layer and rule", len(paths))
	}
	for p := range paths {
		if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(p))); err != nil {
			t.Errorf("docs/architecture.md names %s, which does not exist", p)
		}
	}
	contract, err := os.ReadFile(filepath.Join("..", "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := regexp.MustCompile(`(?m)^## (\d+)\. `).FindAllStringSubmatch(string(contract), -1)
	if len(sections) == 0 {
		t.Fatal("docs/contract.md has no numbered sections")
	}
	for _, s := range sections {
		if !regexp.MustCompile(`(?m)^\| ` + s[1] + ` \| .*\.(go|lua)`).Match(data) {
			t.Errorf("docs/architecture.md has no row naming the code of contract §%s", s[1])
		}
	}
}
