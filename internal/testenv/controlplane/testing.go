package controlplane

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestMain starts one control plane for a package's tests, runs them and stops it,
// also when a test fails or panics. With -short it starts nothing and leaves *cp nil;
// integration tests then skip through Require. Missing binaries are a failure that
// says to run `make tools` (make test builds them first, so CI never skips).
//
// Use it as: func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &cp)) }
func TestMain(m *testing.M, cp **ControlPlane) int { return TestMainWith(m, cp, Options{}) }

// TestMainWith is TestMain with Options (for example Workloads); a nil opts.Logf prints
// progress with -v.
func TestMainWith(m *testing.M, cp **ControlPlane, opts Options) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	if opts.Logf == nil {
		opts.Logf = VerboseLogf
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

// Require skips t when no control plane was started (go test -short), and otherwise
// returns it.
func Require(t testing.TB, cp *ControlPlane) *ControlPlane {
	t.Helper()
	if cp == nil {
		t.Skip("integration test: needs the local control plane (not started with -short)")
	}
	return cp
}

// Eventually polls cond every 100 ms until it returns nil or timeout passes, then fails
// t with the last error. It is the standard wait of integration tests (no sleeps).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = cond(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartForTest starts a control plane of its own for one test (a second cluster beside
// the package's, say) and stops it when the test ends; it skips t with -short.
func StartForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts a control plane of its own (not with -short)")
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting control plane %q (run `make tools` if binaries are missing): %v", opts.Name, err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// VerboseLogf prints a progress line to stderr with go test -v, and nothing without.
func VerboseLogf(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// StartBeside starts a control plane with opts and a working folder of its own (named
// by dirPattern, as os.MkdirTemp does), then start, which starts a component (Argo CD,
// Flux, External Secrets) at that Site (logging to opts.Logf) and returns what stops it.
// The returned stop stops the component and the control plane and removes the folder;
// on error all that was started is undone.
func StartBeside(ctx context.Context, opts Options, dirPattern string,
	start func(site Site) (stop func(), err error)) (_ *ControlPlane, stop func(), err error) {
	cp, err := Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	var dir string
	defer func() {
		if err != nil {
			_ = cp.Stop()
			if dir != "" {
				_ = os.RemoveAll(dir)
			}
		}
	}()
	if dir, err = os.MkdirTemp("", dirPattern); err != nil {
		return nil, nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	stopComponent, err := start(cp.Site(dir, root, opts.Logf))
	if err != nil {
		return nil, nil, err
	}
	return cp, func() { stopComponent(); _ = cp.Stop(); _ = os.RemoveAll(dir) }, nil
}
