package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates completions and man pages into a
// temporary directory and fails when the checked-in files differ: run
// `go run ./internal/gendocs` (make generate) and commit.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	tmp := t.TempDir()
	if err := generate(tmp); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join("..", "..")
	for _, sub := range []string{"completions", "man"} {
		want := readTree(t, filepath.Join(tmp, sub))
		got := readTree(t, filepath.Join(repo, sub))
		for _, name := range union(want, got) {
			w, inWant := want[name]
			g, inGot := got[name]
			switch {
			case !inGot:
				t.Errorf("%s/%s is missing: run 'go run ./internal/gendocs' and commit", sub, name)
			case !inWant:
				t.Errorf("%s/%s is stale (no command generates it): run 'go run ./internal/gendocs' and commit", sub, name)
			case !bytes.Equal(w, g):
				t.Errorf("%s/%s is out of date: run 'go run ./internal/gendocs' and commit", sub, name)
			}
		}
	}
}

// TestGenerateIsDeterministic: two runs write the same bytes.
func TestGenerateIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := generate(a); err != nil {
		t.Fatal(err)
	}
	if err := generate(b); err != nil {
		t.Fatal(err)
	}
	ta, tb := readTree(t, a), readTree(t, b)
	if len(ta) == 0 {
		t.Fatal("nothing generated")
	}
	for _, name := range union(ta, tb) {
		if !bytes.Equal(ta[name], tb[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
	for _, want := range []string{"completions/hermesq.bash", "completions/hermesq.zsh", "completions/hermesq.fish",
		"completions/hermesq.ps1", "man/man1/hermesq.1", "man/man1/hermesq-admit.1", "man/man1/hermesq-drain.1"} {
		if _, ok := ta[filepath.FromSlash(want)]; !ok {
			t.Errorf("%s not generated", want)
		}
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func union(a, b map[string][]byte) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string][]byte{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
