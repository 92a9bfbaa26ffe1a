//go:build flux

package flux_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/flux"
)

// The package's one control plane (with its workloads: the Argo Rollouts controller,
// kube-scheduler and kwok), one Flux and one Git server, shared by every scenario; each
// scenario has its own namespace, repository, GitRepository and Kustomization.
var (
	cp      *controlplane.ControlPlane
	fx      *flux.Flux
	git     *flux.GitServer
	gitRoot string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	start := time.Now()
	logf := func(f string, a ...any) {
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, f+"\n", a...)
		}
	}
	stop, err := startAll(logf)
	if err != nil {
		if errors.Is(err, controlplane.ErrMissingBinaries) || errors.Is(err, flux.ErrMissingBinaries) {
			fmt.Fprintln(os.Stderr, "FAIL: binaries missing: run `make test-flux` (it builds them)")
		}
		fmt.Fprintln(os.Stderr, "FAIL: starting the control plane and Flux:", err)
		return 1
	}
	defer stop()
	code := m.Run()
	fmt.Printf("flux: package total %.1fs (control plane and Flux start included)\n", time.Since(start).Seconds())
	return code
}

// startAll starts the control plane with its workloads, then Flux and the Git server.
func startAll(logf func(string, ...any)) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := controlplane.Start(ctx, controlplane.Options{Name: "flux", Workloads: true, Logf: logf})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cma-flux-")
	if err == nil {
		err = os.MkdirAll(filepath.Join(dir, "git"), 0o700)
	}
	var root string
	if err == nil {
		root, err = controlplane.RepoRoot()
	}
	if err == nil {
		var f *flux.Flux
		f, err = flux.Start(ctx, flux.Options{Kubeconfig: c.Kubeconfig(), RESTConfig: c.RESTConfig(),
			BinDir: c.BinDir(), Dir: dir, Root: root, Logf: logf})
		if err == nil {
			var g *flux.GitServer
			if g, err = flux.ServeGit(filepath.Join(dir, "git")); err == nil {
				cp, fx, git, gitRoot = c, f, g, filepath.Join(dir, "git")
				return func() { _ = g.Close(); f.Stop(); _ = c.Stop(); _ = os.RemoveAll(dir) }, nil
			}
			f.Stop()
		}
	}
	_ = c.Stop()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	return nil, err
}
