package externalsecrets_test

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
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/externalsecrets"
)

// The package's one control plane (with its workloads: kube-scheduler, kwok, the Argo
// Rollouts controller, and kube-controller-manager's garbage collector) and one External
// Secrets controller, shared by every scenario; each scenario has its own namespace,
// SecretStore and service.
var (
	cp  *controlplane.ControlPlane
	eso *externalsecrets.ESO
)

// enableEnv runs the package's scenarios (`make test-eso` sets it); without it every
// scenario skips.
const enableEnv = "CONFIGMAP_ATTACHER_ESO"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	if os.Getenv(enableEnv) == "" {
		// Not part of `make test`: ESO's build is long (README, "External Secrets beside it").
		fmt.Fprintf(os.Stderr, "externalsecrets: skipped; `make test-eso` builds External Secrets and runs it (%s=1)\n", enableEnv)
		return m.Run()
	}
	logf := controlplane.VerboseLogf
	start := time.Now()
	c, e, stop, err := startAll(logf)
	if err != nil {
		if errors.Is(err, controlplane.ErrMissingBinaries) || errors.Is(err, externalsecrets.ErrMissingBinary) {
			fmt.Fprintln(os.Stderr, "FAIL: binaries missing: run `make tools` and `hack/tools/build.sh external-secrets`")
		}
		fmt.Fprintln(os.Stderr, "FAIL: starting the control plane and External Secrets:", err)
		return 1
	}
	defer stop()
	cp, eso = c, e
	logf("externalsecrets: control plane and External Secrets started in %s", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

func startAll(logf func(string, ...any)) (*controlplane.ControlPlane, *externalsecrets.ESO, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var e *externalsecrets.ESO
	c, stop, err := controlplane.StartBeside(ctx, controlplane.Options{Name: "eso", Workloads: workloadsBuilt(), Logf: logf}, "cma-eso-",
		func(site controlplane.Site) (func(), error) {
			var err error
			if e, err = externalsecrets.Start(ctx, externalsecrets.Options{Site: site}); err != nil {
				return nil, err
			}
			return e.Stop, nil
		})
	return c, e, stop, err
}

// workloadsBuilt reports whether the workload binaries (kube-scheduler, kwok, the Argo
// Rollouts controller) are built; `make test-eso` builds them. Without them only the
// scenarios on bare ReplicaSets run (needWorkloads).
func workloadsBuilt() bool {
	dir := os.Getenv("CONFIGMAP_ATTACHER_BIN_DIR")
	if dir == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return false
		}
		dir = filepath.Join(root, "bin")
	}
	for _, b := range controlplane.WorkloadBinaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false
		}
	}
	return true
}

// needWorkloads skips a scenario that needs the real Argo Rollouts controller when its
// binaries are not built (`make test-eso` builds them, so there it never skips).
func needWorkloads(t *testing.T) {
	t.Helper()
	if !workloadsBuilt() {
		t.Skip("needs kube-scheduler, kwok and the Argo Rollouts controller: make test-eso builds them")
	}
}
