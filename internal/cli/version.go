package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// VersionOptions are the flags of `configmap-attacher version`.
type VersionOptions struct {
	Output string
}

// VersionInfo is what `version -o json|yaml` prints.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func newVersionCommand(s *Streams) *cobra.Command {
	o := VersionOptions{Output: OutputText}
	cmd := &cobra.Command{
		Use:   "version [-o text|json|yaml]",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := validOutput(&o.Output, OutputText, OutputJSON, OutputYAML); err != nil {
				return err
			}
			v := VersionInfo{Version: Version, Commit: commit(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if ok, err := writeStructured(s.Out, o.Output, v); ok {
				return err
			}
			_, err := fmt.Fprintln(s.Out, versionLine())
			return err
		},
	}
	addOutputFlag(cmd.Flags(), &o.Output, OutputText, OutputJSON, OutputYAML)
	return cmd
}

// versionLine is the text both `version` and `--version` print.
func versionLine() string {
	return fmt.Sprintf("configmap-attacher %s (%s, %s/%s, commit %s)", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, commit())
}

// commit is the source commit: Commit as stamped, else the one the go command recorded
// (a build inside a Git work tree), else "unknown".
func commit() string {
	if Commit != "" {
		return Commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}
