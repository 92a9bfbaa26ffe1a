package clusters_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestClusterAddedRemovedAndReAddedLeavesNothingRunning (breaker s7): an Argo CD
// cluster Secret created and deleted again and again while serve --watch runs a
// watcher, a leader-elected sweeper and caches per cluster. Each registration starts
// informers, a watcher, a sweeper with its elector, a probe and Event broadcasters;
// each removal must stop them all: after the cycles the process runs no more
// goroutines than after the first one.
func TestClusterAddedRemovedAndReAddedLeavesNothingRunning(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	ns, argocd, leases := namespace(t, b, "break-cycle"), namespace(t, a, "break-cycle-argocd"), namespace(t, a, "break-cycle-leases")
	orphan(t, b, ns, "young") // every sweep of the member has a namespace to plan

	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{Watch: true, WatchResync: time.Hour,
		GC: &server.GCOptions{Interval: 200 * time.Millisecond, LeaseNamespace: leases, Options: gc.Options{MinAge: time.Hour}}})
	secrets := a.Client().CoreV1().Secrets(argocd)

	cycle := func(i int) {
		t.Helper()
		name := fmt.Sprintf("member-%d", i)
		sec := clusterSecret(b, argocd, "member", name)
		createSecret(t, a, sec)
		controlplane.Eventually(t, 60*time.Second, name+" swept", func() error {
			if code, body := s.gcDryRun(t, name, ns); code != http.StatusOK {
				return fmt.Errorf("gc %s: %d %s", name, code, body)
			}
			if s.sweeps(t, name) == 0 {
				return fmt.Errorf("no periodic sweep of %s yet", name)
			}
			return nil
		})
		require.NoError(t, secrets.Delete(ctx, "member", metav1.DeleteOptions{}))
		controlplane.Eventually(t, 60*time.Second, name+" unknown", func() error {
			if code, body := s.gcDryRun(t, name, ns); code != http.StatusBadRequest {
				return fmt.Errorf("gc %s after its Secret's deletion: %d %s", name, code, body)
			}
			return nil
		})
	}
	cycle(0)
	s.warmUsers(t, a, "hub")
	keepGoroutinesOnFailure(t)
	base := settledGoroutines()
	const cycles = 5
	for i := 1; i <= cycles; i++ {
		cycle(i)
	}
	var last int
	controlplane.Eventually(t, 60*time.Second, "goroutines back to one cycle's", func() error {
		// A registration runs far more than 10 goroutines; slack for HTTP/2 and timers.
		if last = settledGoroutines(); last > base+10 {
			return fmt.Errorf("%d goroutines after %d more add/remove cycles, %d after the first", last, cycles, base)
		}
		return nil
	})
}

// keepGoroutinesOnFailure writes every goroutine's stack to a file if t fails, and logs
// where: a test that counts goroutines must show which ones were left.
func keepGoroutinesOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		f, err := os.CreateTemp("", "cma-goroutines-*.txt")
		if err != nil {
			return
		}
		defer f.Close()
		_ = pprof.Lookup("goroutine").WriteTo(f, 1)
		t.Logf("goroutines at the failure kept in %s", f.Name())
	})
}

func settledGoroutines() int {
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return runtime.NumGoroutine()
}
