package acceptance_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// cp is the package's control plane, started with its workloads.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	start := time.Now()
	code := controlplane.TestMainWith(m, &cp, controlplane.Options{Name: "acceptance", Workloads: true})
	if !testing.Short() {
		printTimes(time.Since(start))
	}
	os.Exit(code)
}

// pluginPath is the kubectl-argo-rollouts plugin built by make tools.
func pluginPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(cp.BinDir(), "kubectl-argo-rollouts")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: run `make tools`", err)
	}
	return p
}

// times records how long each scenario took, printed after the run.
var times struct {
	sync.Mutex
	by map[string]time.Duration
}

// timed records t's duration under its name when it ends.
func timed(t *testing.T) {
	start := time.Now()
	t.Cleanup(func() {
		times.Lock()
		defer times.Unlock()
		if times.by == nil {
			times.by = map[string]time.Duration{}
		}
		times.by[t.Name()] = time.Since(start)
	})
}

func printTimes(total time.Duration) {
	times.Lock()
	defer times.Unlock()
	names := make([]string, 0, len(times.by))
	for n := range times.by {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("acceptance: time per scenario")
	for _, n := range names {
		fmt.Printf("  %-80s %6.1fs\n", n, times.by[n].Seconds())
	}
	fmt.Printf("acceptance: package total %.1fs (control plane start included)\n", total.Seconds())
}
