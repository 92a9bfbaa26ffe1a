// Package bench is the harness behind `make bench`: it starts a real local control plane
// (internal/testenv/controlplane), an embedded NATS JetStream EventBus and the configmap-attacher
// service as a separate process built from ./cmd/configmap-attacher, drives ReplicaSet
// creation at a controlled rate, observes ownerReferences appear through a watch, reads
// request counts from the apiserver's own metrics and the service's RSS from /proc, and
// reports every figure next to a baseline measured in the same run.
//
// Nothing here asserts timings: targets are read from the table (Report.Rows).
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// Config sizes a run. Zero values are replaced by DefaultConfig's.
type Config struct {
	// Binary is the configmap-attacher binary run as the service and as the old one-shot
	// Job (required).
	Binary string
	// Paths are the ingress paths measured: watcher, eventbus, http, argo-grpc, and the
	// argo-k8s baseline (Argo Events' own k8s trigger, no configmap-attacher).
	Paths []string
	// N ReplicaSets per path for the paced latency run, created at Rate per second.
	N    int
	Rate float64
	// BurstN ReplicaSets per path created as fast as the apiserver accepts them with
	// BurstWorkers concurrent creators (the sustained-rate run).
	BurstN, BurstWorkers int
	// HTTPSenders is how many POSTs the http path's feeder has in flight (default
	// dispatch.DefaultMaxInFlight: as many as the receiver takes before it answers 429).
	HTTPSenders int
	// SensorAlone runs, right after argo-grpc, the same real Argo Events pipeline with
	// the Sensor's custom trigger aimed at a no-op trigger server in the harness: the
	// sensor's own pace (DefaultConfig: true).
	SensorAlone bool
	// ArgoLanes > 1 splits each trigger of the shipped gRPC Sensor in that many lanes
	// for argo-grpc and its baseline (an experiment, laneSensor; 0 or 1: as shipped).
	ArgoLanes int
	// ArgoN caps N and BurstN for the paths through the real Argo Events processes.
	ArgoN int
	// WatchWorkers, when set, is passed to the watcher path's service as
	// `serve --watch-workers` (zero: the service's default).
	WatchWorkers int
	// ArgoK8sN caps N and BurstN for argo-k8s: its sensor-service's Kubernetes client
	// runs at client-go's default 5 QPS (not configurable in Argo Events v1.9), about
	// 2.5 events/s for a GET and a PATCH each, so a large run only measures a longer queue.
	ArgoK8sN int
	// ArgoK8sPatch is the argo-k8s baseline's patchStrategy (argoevents.PatchMerge, the
	// default, or argoevents.PatchStrategic).
	ArgoK8sPatch string
	// FloorN bare PATCHes for the floor; LegacyN one-shot processes for the old Job.
	FloorN, LegacyN int
	// ReplayN ADD events replayed for already-attached ReplicaSets.
	ReplayN int
	// GC sweep: revisions, ReplicaSets, true orphans among the revisions.
	GCRevisions, GCReplicaSets, GCOrphans int
	// GCParallel bounds the sweep's deletes in flight (gc.Config.Parallel; 0: its default).
	GCParallel int
	// MemLevels are the ConfigMap counts of the memory and scaling curve; MemBigBytes the
	// data size of a "big" ConfigMap; CurveN ReplicaSets per level for the latency curve.
	MemLevels []int
	// RSLevels are the ReplicaSet counts of serve's memory curve (realistic templates);
	// RSRevisions revisions are added at the last level (0: none).
	RSLevels    []int
	RSRevisions int
	// SweepNamespaces x SweepRS ReplicaSets x SweepRevisions revisions: the sweep from
	// the caches (0 namespaces: skip).
	SweepNamespaces, SweepRS, SweepRevisions int
	// ClusterLevels are the idle Argo CD cluster counts one replica serves in the
	// per-cluster cost rows (empty: skip); ForwardN events each go to the owner and
	// through a forwarding replica of a two-replica fleet at the first level above one.
	ClusterLevels []int
	ForwardN      int
	// FleetClusters idle Argo CD clusters shared by FleetReplicas `serve --fleet --watch`
	// processes (0 clusters: skip).
	FleetClusters, FleetReplicas int
	// FleetShards, when set, is the fleet's `serve --fleet-shards` (0: serve's default, 16).
	FleetShards int
	// LiveClusters clusters of LiveRS ReplicaSets (3 KiB templates) and as many
	// unattached revisions each, served by one replica with the watcher, whose start-up
	// replay attaches them; LiveN fresh ReplicaSets' ADD events POSTed the moment
	// /readyz answers, and LiveN more once the replay is done (0 clusters: skip).
	LiveClusters, LiveRS, LiveN int
	// GoMemLimit, when set, is the service's GOMEMLIMIT (the chart sets it to the
	// container's memory limit); empty: the Go runtime's default (none).
	GoMemLimit  string
	MemBigBytes int
	CurveN      int
	// QPS and Burst of the service's and the harness's clients (the service's defaults,
	// 50/100, would cap every rate at 50 writes/s).
	QPS   float32
	Burst int
	// Settle is how long to wait for an ownerReference before counting it lost.
	Settle time.Duration
	// ResultsDir receives the JSON report; LogDir the service's logs (default: temp).
	ResultsDir, LogDir string
	// ControlPlane, when set, is used instead of starting one (the smoke test).
	ControlPlane *controlplane.ControlPlane `json:"-"`
	// Logf receives progress lines.
	Logf func(format string, args ...any) `json:"-"`
	// Quick marks a BENCH_QUICK run in the report.
	Quick bool
}

// DefaultConfig returns the sizes where they finish in about 15-20 minutes on
// two shared cores.
func DefaultConfig() Config {
	return Config{Paths: []string{"watcher", "eventbus", "http", "argo-grpc", "argo-k8s"},
		N: 1000, Rate: 50, BurstN: 1000, BurstWorkers: 16, HTTPSenders: dispatch.DefaultMaxInFlight, SensorAlone: true, ArgoN: 300, ArgoK8sN: 150, FloorN: 1000, LegacyN: 30, ReplayN: 1000,
		GCRevisions: 10000, GCReplicaSets: 2000, GCOrphans: 1000,
		MemLevels: []int{100, 1000, 10000}, MemBigBytes: 64 << 10, CurveN: 100,
		RSLevels: []int{1000, 10000, 50000}, RSRevisions: 100000, SweepNamespaces: 1000, SweepRS: 10, SweepRevisions: 20,
		ClusterLevels: []int{1, 10, 100}, ForwardN: 200, FleetClusters: 1000, FleetReplicas: 4,
		LiveClusters: 50, LiveRS: 200, LiveN: 200,
		QPS: 1000, Burst: 2000, Settle: 60 * time.Second, ResultsDir: "bench/results"}
}

// QuickConfig is BENCH_QUICK=1: the same scenarios at sizes that finish in a few minutes.
func QuickConfig() Config {
	c := DefaultConfig()
	c.N, c.BurstN, c.ArgoN, c.ArgoK8sN, c.FloorN, c.LegacyN, c.ReplayN = 200, 200, 100, 50, 200, 10, 200
	c.GCRevisions, c.GCReplicaSets, c.GCOrphans = 1000, 200, 100
	c.MemLevels, c.CurveN, c.Quick = []int{100, 1000}, 50, true
	c.RSLevels, c.RSRevisions, c.SweepNamespaces = []int{1000, 5000}, 10000, 100
	c.ClusterLevels, c.ForwardN = []int{1, 10}, 50
	c.FleetClusters, c.LiveClusters, c.LiveRS, c.LiveN = 40, 20, 20, 100
	c.Settle = 30 * time.Second
	return c
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.Paths == nil {
		c.Paths = d.Paths
	}
	if c.Rate <= 0 {
		c.Rate = d.Rate
	}
	if c.BurstWorkers <= 0 {
		c.BurstWorkers = d.BurstWorkers
	}
	if c.HTTPSenders <= 0 {
		c.HTTPSenders = d.HTTPSenders
	}
	if c.MemBigBytes <= 0 {
		c.MemBigBytes = d.MemBigBytes
	}
	if c.QPS <= 0 {
		c.QPS, c.Burst = d.QPS, d.Burst
	}
	if c.Settle <= 0 {
		c.Settle = d.Settle
	}
	if c.FleetReplicas <= 0 {
		c.FleetReplicas = d.FleetReplicas
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// env is what every scenario shares.
type env struct {
	cfg     Config
	cp      *controlplane.ControlPlane
	rest    *rest.Config
	kc      kubernetes.Interface
	nats    *natsserver.Server
	logDir  string
	metrics *apiMetrics
	log     *slog.Logger
}

// Run runs every scenario and returns the report (also written as JSON under
// cfg.ResultsDir when that is set). A scenario that fails is recorded in Report.Errors
// and the others still run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.fill()
	if cfg.Binary == "" {
		return nil, errors.New("bench: Config.Binary is required")
	}
	if _, err := os.Stat(cfg.Binary); err != nil {
		return nil, fmt.Errorf("bench: service binary: %w", err)
	}
	rep := &Report{Started: time.Now().UTC(), CPUs: runtime.NumCPU(), LoadStart: loadAvg(), Quick: cfg.Quick, Config: cfg}
	e := &env{cfg: cfg, log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	var err error
	if e.logDir = cfg.LogDir; e.logDir == "" {
		if e.logDir, err = os.MkdirTemp("", "cma-bench-"); err != nil {
			return nil, fmt.Errorf("bench: log dir: %w", err)
		}
	}
	if err := os.MkdirAll(e.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: log dir: %w", err)
	}
	rep.LogDir = e.logDir
	e.cp = cfg.ControlPlane
	if e.cp == nil {
		cfg.Logf("starting the local control plane (etcd, kube-apiserver, kube-controller-manager)...")
		if e.cp, err = controlplane.Start(ctx, controlplane.Options{Name: "bench", Logf: cfg.Logf}); err != nil {
			return nil, fmt.Errorf("bench: control plane: %w", err)
		}
		defer func() { _ = e.cp.Stop() }()
	}
	e.rest = rest.CopyConfig(e.cp.RESTConfig())
	e.rest.QPS, e.rest.Burst = cfg.QPS, cfg.Burst
	if e.kc, err = kubernetes.NewForConfig(e.rest); err != nil {
		return nil, fmt.Errorf("bench: client: %w", err)
	}
	if e.metrics, err = newAPIMetrics(e.cp); err != nil {
		return nil, err
	}
	if e.nats, err = natsserver.Start(ctx, natsserver.Options{}); err != nil {
		return nil, fmt.Errorf("bench: NATS: %w", err)
	}
	defer e.nats.Stop()

	step := func(name string, f func() error) {
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		cfg.Logf("== %s", name)
		if err := f(); err != nil {
			cfg.Logf("!! %s: %v", name, err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", name, err))
		}
		cfg.Logf("   %s done in %s (load %s)", name, time.Since(start).Round(time.Second), loadAvg())
	}
	if cfg.FloorN > 0 {
		step("floor: bare PATCH over a warm client", func() error { return e.floor(ctx, rep) })
	}
	for _, p := range cfg.Paths {
		step("ingress path "+p, func() error { return e.path(ctx, p, rep) })
		if p == "argo-grpc" && cfg.SensorAlone {
			step("baseline: the real sensor alone (no-op trigger)", func() error { return e.sensorAlone(ctx, rep) })
		}
	}
	for _, p := range cfg.Paths {
		if p != "argo-k8s" {
			continue
		}
		other := argoevents.PatchStrategic
		if cfg.ArgoK8sPatch == argoevents.PatchStrategic {
			other = argoevents.PatchMerge
		}
		step("argo-k8s semantics with "+other, func() error { return e.k8sSemanticsWith(ctx, other, rep) })
	}
	if cfg.LegacyN > 0 {
		step("baseline: the old one-shot Job", func() error { return e.legacy(ctx, rep) })
	}
	if cfg.GCRevisions > 0 {
		step("GC sweep", func() error { return e.gcSweep(ctx, rep) })
	}
	if len(cfg.MemLevels) > 0 {
		step("memory and scaling curve", func() error { return e.memory(ctx, rep) })
	}
	if cfg.SweepNamespaces > 0 {
		step("sweep from the caches", func() error { return e.sweepScale(ctx, rep) })
	}
	if len(cfg.RSLevels) > 0 {
		step("memory with ReplicaSets cached", func() error { return e.rsMemory(ctx, rep) })
	}
	if len(cfg.ClusterLevels) > 0 {
		step("per-cluster cost and forwarding", func() error { return e.clusters(ctx, rep) })
	}
	if cfg.FleetClusters > 0 {
		step(fmt.Sprintf("fleet: %d clusters over %d replicas", cfg.FleetClusters, cfg.FleetReplicas), func() error { return e.fleet(ctx, rep) })
	}
	if cfg.LiveClusters > 0 && cfg.LiveN > 0 {
		step("live events during the start-up replay", func() error { return e.liveDuringReplay(ctx, rep) })
	}
	rep.Finished = time.Now().UTC()
	rep.LoadEnd = loadAvg()
	rep.build()
	if cfg.ResultsDir != "" {
		path, err := rep.WriteJSON(cfg.ResultsDir)
		if err != nil {
			return rep, err
		}
		rep.JSONPath = path
	}
	return rep, ctx.Err()
}

// loadAvg returns /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
