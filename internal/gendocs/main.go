// Command gendocs writes hermesq's shell completions (completions/) and man
// pages (man/man1/) from the command tree. The output is deterministic (a
// fixed date in the man page headers), so CI regenerates it and fails when
// the checked-in files differ.
//
//	go run ./internal/gendocs [-dir DIR]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/hermesq/hermesq/internal/cli"
)

// manDate is the date in every man page header: fixed, so regenerating is
// byte-identical. Change it when the command-line surface changes.
var manDate = time.Date(2026, time.December, 1, 0, 0, 0, 0, time.UTC)

func main() {
	dir := flag.String("dir", ".", "repository root to write completions/ and man/ under")
	flag.Parse()
	if err := generate(*dir); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
}

// rootCmd is the command tree as the binary builds it, with cobra's
// completion command added as Execute would add it.
func rootCmd() *cobra.Command {
	ios := &cli.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}
	root := cli.NewRootCmd(cli.NewFactory(ios))
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	return root
}

// generate writes completions/hermesq.{bash,zsh,fish,ps1} and
// man/man1/*.1 under dir, removing man pages of commands that no longer
// exist.
func generate(dir string) error {
	root := rootCmd()
	compDir := filepath.Join(dir, "completions")
	manDir := filepath.Join(dir, "man", "man1")
	for _, d := range []string{compDir, manDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	comps := []struct {
		file string
		gen  func(w io.Writer) error
	}{
		{"hermesq.bash", func(w io.Writer) error { return root.GenBashCompletionV2(w, true) }},
		{"hermesq.zsh", root.GenZshCompletion},
		{"hermesq.fish", func(w io.Writer) error { return root.GenFishCompletion(w, true) }},
		{"hermesq.ps1", root.GenPowerShellCompletionWithDesc},
	}
	for _, c := range comps {
		var b strings.Builder
		if err := c.gen(&b); err != nil {
			return fmt.Errorf("%s: %w", c.file, err)
		}
		if err := os.WriteFile(filepath.Join(compDir, c.file), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}

	old, err := filepath.Glob(filepath.Join(manDir, "*.1"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	header := &doc.GenManHeader{
		Title:   "HERMESQ",
		Section: "1",
		Date:    &manDate,
		Source:  "hermesq",
		Manual:  "hermesq manual",
	}
	if err := doc.GenManTree(root, header, manDir); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	return nil
}
