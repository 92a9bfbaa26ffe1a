package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// GCResult is one orphan sweep of a namespace.
type GCResult struct {
	Revisions, ReplicaSets, TrueOrphans int
	// DryRun: plan only (lists, no writes). Sweep: the real run.
	DryRunSeconds float64 `json:"dryRunSeconds"`
	SweepSeconds  float64 `json:"sweepSeconds"`
	WouldDelete   int     `json:"wouldDelete"`
	Deleted       int     `json:"deleted"`
	// Requests the sweeper's client sent (kube.RequestCounter), by verb, and the
	// apiserver's DELETE count on ConfigMaps.
	Requests       map[string]int `json:"requests"`
	APIDeletes     float64        `json:"apiDeletes"`
	Outcomes       map[string]int `json:"outcomes"`
	ClientQPS      float32        `json:"clientQPS"`
	DeletesPerSec  float64        `json:"deletesPerSecond"`
	DefaultQPSNote string         `json:"note"`
	// Parallel is the sweeper's bound on deletes in flight (gc.Config.Parallel).
	Parallel int `json:"parallel"`
	// PlanSeconds is one snapshot (every list) plus the plan, timed alone; a real sweep
	// plans twice (plan, then confirm) before it deletes.
	PlanSeconds float64 `json:"planSeconds"`
	// DeleteSeconds is the real sweep's delete phase: the first DELETE sent to the last
	// DELETE answered, from the client's own transport.
	DeleteSeconds float64 `json:"deleteSeconds"`
}

// deleteSpan records the first DELETE sent and the last DELETE answered through the
// configs it wraps.
type deleteSpan struct {
	mu          sync.Mutex
	first, last time.Time
}

func (d *deleteSpan) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodDelete {
				return rt.RoundTrip(req)
			}
			d.mu.Lock()
			if d.first.IsZero() {
				d.first = time.Now()
			}
			d.mu.Unlock()
			resp, err := rt.RoundTrip(req)
			d.mu.Lock()
			d.last = time.Now()
			d.mu.Unlock()
			return resp, err
		})
	}
	return out
}

func (d *deleteSpan) seconds() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.first.IsZero() {
		return 0
	}
	return d.last.Sub(d.first).Seconds()
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// gcSweep builds a namespace of GCRevisions revisions and GCReplicaSets ReplicaSets:
// each ReplicaSet references and owns one revision, the other non-orphans are owned by
// a live ReplicaSet but not referenced, and GCOrphans are neither owned nor referenced.
// It then sweeps it once dry and once for real (min age 0, keep 0).
func (e *env) gcSweep(ctx context.Context, rep *Report) error {
	ns := "bench-gc"
	r, k, o := e.cfg.GCRevisions, e.cfg.GCReplicaSets, e.cfg.GCOrphans
	if k < 1 || o > r-k {
		return fmt.Errorf("gc sizes: want 1 <= replicasets and orphans <= revisions-replicasets, got %d revisions, %d ReplicaSets, %d orphans", r, k, o)
	}
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	start := time.Now()
	uids := make([]types.UID, k)
	if err := parallel(ctx, 0, k, 16, func(ctx context.Context, i int) error {
		rs, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, fmt.Sprintf("gcrs-%d", i), fmt.Sprintf("rev-%d", i)), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating ReplicaSet: %w", err)
		}
		uids[i] = rs.UID
		return nil
	}); err != nil {
		return err
	}
	no := false
	if err := parallel(ctx, 0, r, 16, func(ctx context.Context, i int) error {
		cm := revision(ns, fmt.Sprintf("rev-%d", i), 0, map[string]string{core.LabelFamily: fmt.Sprintf("fam-%d", i%100)})
		if i < r-o {
			owner := i % k
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("gcrs-%d", owner),
				UID: uids[owner], Controller: &no}}
		}
		if _, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating revision: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	e.cfg.Logf("   gc: %d revisions, %d ReplicaSets created in %s", r, k, time.Since(start).Round(time.Second))
	time.Sleep(1100 * time.Millisecond) // every revision older than min age 0 at second resolution

	counter := &kube.RequestCounter{}
	span := &deleteSpan{}
	clients, err := kube.NewClients(span.wrap(counter.Wrap(e.rest)))
	if err != nil {
		return err
	}
	sw, err := gc.NewSweeper(gc.Config{Cluster: "in-cluster", Client: clients.Kube,
		Source:  gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
		Options: gc.Options{MinAge: 0, Keep: 0}, Namespaces: []string{ns}, Parallel: e.cfg.GCParallel,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	res := &GCResult{Revisions: r, ReplicaSets: k, TrueOrphans: o, ClientQPS: e.cfg.QPS, Outcomes: map[string]int{},
		DefaultQPSNote: "serve and `configmap-attacher gc` default to 50 QPS: deletes are paced at 50/s there",
		Parallel:       e.cfg.GCParallel}
	if res.Parallel <= 0 {
		res.Parallel = gc.DefaultParallel
	}
	t0 := time.Now()
	if _, _, err := sw.Plan(ctx, ns); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	res.PlanSeconds = time.Since(t0).Seconds()
	t0 = time.Now()
	dry, err := sw.SweepNamespaceDryRun(ctx, ns)
	if err != nil {
		return fmt.Errorf("dry-run sweep: %w", err)
	}
	res.DryRunSeconds = time.Since(t0).Seconds()
	res.WouldDelete = dry.Count(gc.OutcomeWouldDelete)
	counter.Reset()
	m0, err := e.metrics.snapshot(ctx)
	if err != nil {
		return err
	}
	t0 = time.Now()
	real, err := sw.SweepNamespace(ctx, ns)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	res.SweepSeconds = time.Since(t0).Seconds()
	res.DeleteSeconds = span.seconds()
	m1, err := e.metrics.snapshot(ctx)
	if err != nil {
		return err
	}
	res.Deleted = real.Count(gc.OutcomeDeleted)
	for _, it := range real.Results {
		res.Outcomes[string(it.Outcome)]++
	}
	res.Requests = map[string]int{}
	for _, v := range []string{http.MethodGet, "WATCH", http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if c := counter.Count(v); c > 0 {
			res.Requests[v] = c
		}
	}
	res.APIDeletes = m1.since(m0)["DELETE configmaps"]
	if res.SweepSeconds > 0 {
		res.DeletesPerSec = float64(res.Deleted) / res.SweepSeconds
	}
	rep.GC = res
	e.cfg.Logf("   gc: plan %.2fs, dry run %.2fs (%d would go), sweep %.2fs (deletes %.2fs, %d at once), %d deleted of %d true orphans, requests %v",
		res.PlanSeconds, res.DryRunSeconds, res.WouldDelete, res.SweepSeconds, res.DeleteSeconds, res.Parallel, res.Deleted, o, res.Requests)
	return nil
}
