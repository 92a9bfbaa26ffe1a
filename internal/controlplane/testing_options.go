package controlplane

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMainWith is TestMain with Start options, for a test package that needs more of
// the control plane than the default (for example the StatefulSet, DaemonSet, Job and
// CronJob controllers in Options.Controllers). opts.Logf is set by TestMainWith.
func TestMainWith(m *testing.M, cp **ControlPlane, opts Options) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	opts.Logf = func(f string, a ...any) {
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, f+"\n", a...)
		}
	}
	started, err := Start(context.Background(), opts)
	if err != nil {
		if errors.Is(err, ErrMissingBinaries) {
			fmt.Fprintln(os.Stderr, "FAIL: the local control plane's binaries are missing: run `make tools` (make test does it for you)")
		}
		fmt.Fprintln(os.Stderr, "FAIL: starting the local control plane:", err)
		return 1
	}
	*cp = started
	defer func() { _ = started.Stop() }()
	return m.Run()
}
