package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dev/bench/fixture"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// RSMemPoint is serve --watch's memory with ReplicaSets cached (realistic templates) and,
// at the last level, Revisions revision metadata too.
type RSMemPoint struct {
	ReplicaSets int `json:"replicaSets"`
	Revisions   int `json:"revisions"`
	// RSS is VmRSS 3 s after the start-up is done (the caches synced and the start-up
	// replay handled: the service's "start-up done" log line); ReadyRSS 3 s after /readyz
	// (during the replay); Peak is VmHWM then.
	RSS          int64   `json:"rssBytes"`
	ReadyRSS     int64   `json:"readyRssBytes,omitempty"`
	Peak         int64   `json:"peakBytes"`
	ReadySeconds float64 `json:"readySeconds"`
	// DoneSeconds: process start -> "start-up done" (0: not seen within 5 minutes).
	DoneSeconds float64 `json:"doneSeconds,omitempty"`
	// BytesPerRS is (RSS - RSS with none) / ReplicaSets; BytesPerRevision (at the point
	// with revisions) is (RSS - RSS with the same ReplicaSets and none) / Revisions.
	BytesPerRS       float64 `json:"bytesPerReplicaSet"`
	BytesPerRevision float64 `json:"bytesPerRevision,omitempty"`
	// Curve: CurveN ReplicaSets through the watcher at this size; Floor: CurveN bare
	// PATCHes right before it, against the apiserver holding this many objects.
	Curve runResult    `json:"curve"`
	Floor *FloorResult `json:"floor,omitempty"`
}

// sharedConfig is the (not opted-in) ConfigMap every realisticReplicaSet mounts: it
// exists, so the service's start-up replay of every ReplicaSet answers from the caches
// (skipped: not opted in) as in a cluster whose ReplicaSets are all attached already.
const sharedConfig = "app-config-shared"

// realisticReplicaSet is fixture.RealisticReplicaSet mounting sharedConfig.
func realisticReplicaSet(ns, name string) *appsv1.ReplicaSet {
	return fixture.RealisticReplicaSet(ns, name, sharedConfig)
}

// rsMemory measures serve --watch's RSS and start-up time with RSLevels ReplicaSets in
// the namespace it watches, then with RSRevisions revisions added, and the watcher's
// latency at that size.
func (e *env) rsMemory(ctx context.Context, rep *Report) error {
	ns := "bench-rsmem"
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: sharedConfig, Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, shared, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	base, err := e.measureRS(ctx, ns, 0, 0, false)
	if err != nil {
		return err
	}
	rep.RSMemory = append(rep.RSMemory, base)
	have := 0
	for i, level := range e.cfg.RSLevels {
		start := time.Now()
		if err := parallel(ctx, have, level, 16, func(ctx context.Context, i int) error {
			n := fmt.Sprintf("rsmem-%d", i)
			_, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, realisticReplicaSet(ns, n), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			return err
		}); err != nil {
			return fmt.Errorf("creating ReplicaSets: %w", err)
		}
		have = level
		e.cfg.Logf("   rs memory: %d ReplicaSets in place (%s)", level, time.Since(start).Round(time.Second))
		last := i == len(e.cfg.RSLevels)-1
		p, err := e.measureRS(ctx, ns, level, 0, last && e.cfg.RSRevisions == 0)
		if err != nil {
			return err
		}
		rep.RSMemory = append(rep.RSMemory, withPerRS(p, base))
		if last && e.cfg.RSRevisions > 0 {
			start = time.Now()
			if err := e.createRevisions(ctx, ns, "rsrev", 0, e.cfg.RSRevisions, 0); err != nil {
				return err
			}
			e.cfg.Logf("   rs memory: %d revisions in place (%s)", e.cfg.RSRevisions, time.Since(start).Round(time.Second))
			q, err := e.measureRS(ctx, ns, level, e.cfg.RSRevisions, true)
			if err != nil {
				return err
			}
			q.BytesPerRevision = float64(q.RSS-p.RSS) / float64(q.Revisions)
			rep.RSMemory = append(rep.RSMemory, withPerRS(q, base))
		}
	}
	return nil
}

func withPerRS(p, base *RSMemPoint) *RSMemPoint {
	if p.ReplicaSets > 0 {
		p.BytesPerRS = float64(p.RSS-base.RSS) / float64(p.ReplicaSets)
	}
	return p
}

func (e *env) measureRS(ctx context.Context, ns string, rs, revs int, curve bool) (*RSMemPoint, error) {
	p := &RSMemPoint{ReplicaSets: rs, Revisions: revs}
	svc, err := e.startService(ctx, fmt.Sprintf("rsmem-%d-%d", rs, revs), "--watch", "--watch-namespace", ns, "--log-level", "info")
	if err != nil {
		return nil, err
	}
	defer svc.stop()
	p.ReadySeconds = time.Since(svc.startedAt).Seconds()
	done := make(chan float64, 1)
	go func() {
		var at float64
		if svc.waitLog(ctx, startupDone, 5*time.Minute) {
			at = time.Since(svc.startedAt).Seconds()
		}
		done <- at
	}()
	time.Sleep(3 * time.Second)
	if p.ReadyRSS, _, err = svc.rss(); err != nil {
		return nil, err
	}
	p.DoneSeconds = <-done
	time.Sleep(3 * time.Second)
	if p.RSS, p.Peak, err = svc.rss(); err != nil {
		return nil, err
	}
	e.cfg.Logf("   rs memory: %d RS + %d revisions: RSS %s after start-up (%s at ready+3s, peak %s), ready %.1fs, done %.1fs",
		rs, revs, mib(p.RSS), mib(p.ReadyRSS), mib(p.Peak), p.ReadySeconds, p.DoneSeconds)
	if !curve || e.cfg.CurveN <= 0 {
		return p, nil
	}
	if err := e.ensureNamespace(ctx, "bench-floor"); err != nil {
		return nil, err
	}
	if p.Floor, err = e.measureFloor(ctx, "bench-floor", fmt.Sprintf("floor%d-%d", rs, revs), e.cfg.CurveN); err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("rscurve%d", rs)
	if err := e.createRevisions(ctx, ns, prefix, 0, e.cfg.CurveN, 0); err != nil {
		return nil, err
	}
	t, err := e.track(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer t.stop()
	names, err := e.createReplicaSets(ctx, t, ns, prefix+"-rs", prefix, 0, e.cfg.CurveN, e.cfg.Rate, 0)
	if err != nil {
		return nil, err
	}
	p.Curve = t.result(names)
	return p, nil
}

// SweepScale is the orphan sweep over many namespaces, planned from the caches (what
// serve runs) and, as the baseline, from live lists.
type SweepScale struct {
	Namespaces, ReplicaSetsPerNS, RevisionsPerNS int
	// First: the sweep that finds one orphan per namespace; Steady: the next one.
	FirstSeconds  float64        `json:"firstSeconds"`
	FirstRequests map[string]int `json:"firstRequests"`
	FirstDeleted  int            `json:"firstDeleted"`
	SteadySeconds float64        `json:"steadySeconds"`
	SteadyReqs    map[string]int `json:"steadyRequests"`
	// Live: a dry-run sweep of the same namespaces from live lists (the old source).
	LiveSeconds  float64        `json:"liveSeconds"`
	LiveRequests map[string]int `json:"liveRequests"`
}

func countedRequests(c *kube.RequestCounter) map[string]int {
	out := map[string]int{"LIST": c.Lists()}
	out["GET"] = c.Count(http.MethodGet) - c.Lists()
	for _, v := range []string{"WATCH", http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if n := c.Count(v); n > 0 {
			out[v] = n
		}
	}
	return out
}

// sweepScale builds SweepNamespaces namespaces of SweepRS ReplicaSets and SweepRevisions
// revisions each (ReplicaSet i references and owns revision i, revisions up to the
// last are owned by a ReplicaSet, the last is an orphan) and sweeps them all.
func (e *env) sweepScale(ctx context.Context, rep *Report) error {
	n, k, r := e.cfg.SweepNamespaces, e.cfg.SweepRS, e.cfg.SweepRevisions
	if k < 1 || r < k+1 {
		return fmt.Errorf("sweep sizes: want 1 <= ReplicaSets < revisions, got %d, %d", k, r)
	}
	nss := make([]string, n)
	start := time.Now()
	if err := parallel(ctx, 0, n, 16, func(ctx context.Context, i int) error {
		nss[i] = fmt.Sprintf("bench-sweep-%d", i)
		return e.fillSweepNamespace(ctx, nss[i], k, r)
	}); err != nil {
		return err
	}
	e.cfg.Logf("   sweep: %d namespaces x %d RS x %d revisions in place (%s)", n, k, r, time.Since(start).Round(time.Second))
	time.Sleep(1100 * time.Millisecond) // every revision older than min age 0 at second resolution
	counter := &kube.RequestCounter{}
	clients, err := kube.NewClients(counter.Wrap(e.rest))
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := cache.New(clients, cache.Options{Logger: quiet})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Run(cctx) }()
	if err := c.WaitForSync(ctx); err != nil {
		return err
	}
	// The user informers start with a cluster's first attach or sweep (docs/design.md,
	// "Per-cluster cost"): started here (Workloads waits for them), so the first sweep's
	// requests are the sweep's own, as on a cluster that has had work.
	_, _ = c.Workloads(ctx, nss[0])
	live := gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata}
	newSweeper := func(src gc.Source) (*gc.Sweeper, error) {
		return gc.NewSweeper(gc.Config{Cluster: "in-cluster", Client: clients.Kube, Metadata: clients.Metadata, Source: src,
			Options: gc.Options{MinAge: 0, Keep: 0}, Namespaces: nss, Parallel: e.cfg.GCParallel, Logger: quiet})
	}
	cached, err := newSweeper(gc.CachedSource{Store: c, Live: live})
	if err != nil {
		return err
	}
	res := &SweepScale{Namespaces: n, ReplicaSetsPerNS: k, RevisionsPerNS: r}
	sweep := func(sw *gc.Sweeper, dry bool) (float64, map[string]int, int, error) {
		counter.Reset()
		t0 := time.Now()
		deleted := 0
		for _, ns := range nss {
			f := sw.SweepNamespace
			if dry {
				f = sw.SweepNamespaceDryRun
			}
			rep, err := f(ctx, ns)
			if err != nil {
				return 0, nil, 0, err
			}
			deleted += rep.Count(gc.OutcomeDeleted)
		}
		return time.Since(t0).Seconds(), countedRequests(counter), deleted, nil
	}
	if res.LiveSeconds, res.LiveRequests, _, err = sweep(mustSweeper(newSweeper(live)), true); err != nil {
		return fmt.Errorf("live sweep: %w", err)
	}
	if res.FirstSeconds, res.FirstRequests, res.FirstDeleted, err = sweep(cached, false); err != nil {
		return fmt.Errorf("first cached sweep: %w", err)
	}
	time.Sleep(2 * time.Second) // the deletes reach the caches
	if res.SteadySeconds, res.SteadyReqs, _, err = sweep(cached, false); err != nil {
		return fmt.Errorf("steady cached sweep: %w", err)
	}
	rep.Sweep = res
	e.cfg.Logf("   sweep: live %.2fs %v; cached first %.2fs %v (%d deleted); steady %.2fs %v", res.LiveSeconds, res.LiveRequests,
		res.FirstSeconds, res.FirstRequests, res.FirstDeleted, res.SteadySeconds, res.SteadyReqs)
	return nil
}

func mustSweeper(sw *gc.Sweeper, err error) *gc.Sweeper {
	if err != nil {
		panic(err)
	}
	return sw
}

func (e *env) fillSweepNamespace(ctx context.Context, ns string, k, r int) error {
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	uids := make([]types.UID, k)
	for i := 0; i < k; i++ {
		rs, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, fmt.Sprintf("rs-%d", i), fmt.Sprintf("rev-%d", i)), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating ReplicaSet: %w", err)
		}
		uids[i] = rs.UID
	}
	no := false
	for i := 0; i < r; i++ {
		cm := revision(ns, fmt.Sprintf("rev-%d", i), 0, map[string]string{core.LabelFamily: fmt.Sprintf("fam-%d", i%k)})
		if i < r-1 {
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("rs-%d", i%k), UID: uids[i%k], Controller: &no}}
		}
		if _, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating revision: %w", err)
		}
	}
	return nil
}
