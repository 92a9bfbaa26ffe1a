package argocd_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// The package's one control plane (with its workloads) and one Argo CD, shared by every
// scenario; each scenario has its own namespace, Git repository and Application.
var (
	cp  *controlplane.ControlPlane
	acd *argocd.ArgoCD
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	start := time.Now()
	logf := controlplane.VerboseLogf
	c, a, stop, err := startAll(logf)
	if err != nil {
		if errors.Is(err, controlplane.ErrMissingBinaries) || errors.Is(err, argocd.ErrMissingBinaries) {
			fmt.Fprintln(os.Stderr, "FAIL: binaries missing: run `make tools` (make test does it for you)")
		}
		fmt.Fprintln(os.Stderr, "FAIL: starting the control plane and Argo CD:", err)
		return 1
	}
	defer stop()
	cp, acd = c, a
	code := m.Run()
	printFigures(time.Since(start))
	return code
}

// startAll starts the control plane with its workloads, then Argo CD on it.
func startAll(logf func(string, ...any)) (*controlplane.ControlPlane, *argocd.ArgoCD, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var a *argocd.ArgoCD
	c, stop, err := controlplane.StartBeside(ctx, controlplane.Options{Name: "argocd", Workloads: true, Logf: logf}, "cma-argocd-",
		func(site controlplane.Site) (func(), error) {
			var err error
			if a, err = argocd.Start(ctx, argocd.Options{Site: site}); err != nil {
				return nil, err
			}
			return a.Stop, nil
		})
	return c, a, stop, err
}

// figures are measurements the scenarios report (name -> value), printed after the run
// with each scenario's duration, for the README's Argo CD section.
var figures struct {
	sync.Mutex
	by map[string]string
}

func report(name, format string, args ...any) {
	figures.Lock()
	defer figures.Unlock()
	if figures.by == nil {
		figures.by = map[string]string{}
	}
	figures.by[name] = fmt.Sprintf(format, args...)
}

// timed records t's duration when it ends.
func timed(t *testing.T) {
	start := time.Now()
	t.Cleanup(func() { report(t.Name()+" duration", "%.1fs", time.Since(start).Seconds()) })
}

func printFigures(total time.Duration) {
	figures.Lock()
	defer figures.Unlock()
	names := make([]string, 0, len(figures.by))
	for n := range figures.by {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("argocd: figures")
	for _, n := range names {
		fmt.Printf("  %-90s %s\n", n, figures.by[n])
	}
	fmt.Printf("argocd: package total %.1fs (control plane and Argo CD start included)\n", total.Seconds())
}

const ms = time.Millisecond

func itoa(i int) string { return fmt.Sprint(i) }
