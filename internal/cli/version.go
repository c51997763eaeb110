package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what `hermesq version` reports, read from the build info
// the Go toolchain embeds: the module version (a tag for `go install
// …@vX.Y.Z` or @latest, "(devel)" for a build from a clone), the VCS
// commit of a build from a clone, and the Go version.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

func readVersion() versionInfo {
	v := versionInfo{Version: "(devel)", Commit: "unknown", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line text form: hermesq VERSION (commit C[, modified], GO).
func (v versionInfo) String() string {
	commit := v.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if v.Modified {
		commit += ", modified"
	}
	return fmt.Sprintf("hermesq %s (commit %s, %s)", v.Version, commit, v.Go)
}

func newVersionCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print hermesq's version, commit and Go version",
		Long: `Version prints the version of this hermesq binary (the module version of a
'go install …@version' build, "(devel)" for a build from a clone), the VCS
commit it was built from ("unknown" when the build did not record one) and
the Go version; -o json prints {"version","commit","modified","go"}.
'hermesq --version' prints the same line. Neither reads the store.`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := f.printer()
			if err != nil {
				return err
			}
			v := readVersion()
			return p.object(v, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, v.String())
				return err
			})
		},
	}
}
