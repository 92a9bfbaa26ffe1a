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
	logf := controlplane.VerboseLogf
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
	c, stop, err := controlplane.StartBeside(ctx, controlplane.Options{Name: "flux", Workloads: true, Logf: logf}, "cma-flux-",
		func(site controlplane.Site) (func(), error) {
			gitDir := filepath.Join(site.Dir, "git")
			if err := os.MkdirAll(gitDir, 0o700); err != nil {
				return nil, err
			}
			f, err := flux.Start(ctx, flux.Options{Site: site})
			if err != nil {
				return nil, err
			}
			g, err := flux.ServeGit(gitDir)
			if err != nil {
				f.Stop()
				return nil, err
			}
			fx, git, gitRoot = f, g, gitDir
			return func() { _ = g.Close(); f.Stop() }, nil
		})
	cp = c
	return stop, err
}
