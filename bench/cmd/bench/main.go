// Command bench is `make bench`: it runs internal/dev/bench on a local control plane and
// prints one table (also written as JSON under -results). BENCH_QUICK=1 runs the same
// scenarios at small sizes. See bench/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/dev/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := bench.DefaultConfig()
	if quick, _ := strconv.ParseBool(os.Getenv("BENCH_QUICK")); quick {
		cfg = bench.QuickConfig()
	}
	paths := strings.Join(cfg.Paths, ",")
	levels := joinInts(cfg.MemLevels)
	rsLevels := joinInts(cfg.RSLevels)
	clusterLevels := joinInts(cfg.ClusterLevels)
	qps := float64(cfg.QPS)
	flag.StringVar(&cfg.Binary, "binary", "bin/configmap-attacher", "configmap-attacher binary (the service and the old one-shot Job)")
	flag.StringVar(&paths, "paths", paths, "ingress paths: watcher, eventbus, http (http:N: N senders), argo-grpc, argo-k8s (empty: none)")
	flag.IntVar(&cfg.N, "n", cfg.N, "ReplicaSets per path for the paced latency run")
	flag.Float64Var(&cfg.Rate, "rate", cfg.Rate, "ReplicaSets created per second in the paced run")
	flag.IntVar(&cfg.BurstN, "burst", cfg.BurstN, "ReplicaSets per path created as fast as possible (sustained rate)")
	flag.IntVar(&cfg.BurstWorkers, "burst-workers", cfg.BurstWorkers, "concurrent creators in the burst")
	flag.IntVar(&cfg.HTTPSenders, "http-senders", cfg.HTTPSenders, "POSTs the http path's feeder has in flight (default: the receiver's in-flight limit, dispatch.DefaultMaxInFlight)")
	flag.BoolVar(&cfg.SensorAlone, "sensor-alone", cfg.SensorAlone, "after argo-grpc, run the same real Argo Events pipeline against a no-op trigger (the sensor's own pace)")
	flag.IntVar(&cfg.ArgoLanes, "argo-lanes", cfg.ArgoLanes, "split each trigger of the shipped gRPC Sensor in this many lanes by ReplicaSet UID (1, 2, 4, 8, 16; an experiment)")
	flag.IntVar(&cfg.ArgoN, "argo-n", cfg.ArgoN, "cap of -n and -burst for the real Argo Events paths (argo-grpc, argo-k8s)")
	flag.IntVar(&cfg.WatchWorkers, "watch-workers", cfg.WatchWorkers, "serve --watch-workers for the watcher path (0: not passed, the service's default)")
	flag.IntVar(&cfg.ArgoK8sN, "argo-k8s-n", cfg.ArgoK8sN, "cap of -n and -burst for argo-k8s (its sensor's client runs at 5 QPS)")
	flag.StringVar(&cfg.ArgoK8sPatch, "argo-k8s-patch", "application/merge-patch+json", "patchStrategy of the argo-k8s baseline's k8s trigger (or application/strategic-merge-patch+json)")
	flag.IntVar(&cfg.FloorN, "floor-n", cfg.FloorN, "bare PATCHes for the floor")
	flag.IntVar(&cfg.LegacyN, "legacy-n", cfg.LegacyN, "deploys through the old one-shot Job (a process each; 0: skip)")
	flag.IntVar(&cfg.ReplayN, "replay-n", cfg.ReplayN, "ADD events replayed for attached ReplicaSets")
	flag.IntVar(&cfg.GCRevisions, "gc-revisions", cfg.GCRevisions, "revisions in the GC sweep (0: skip)")
	flag.IntVar(&cfg.GCReplicaSets, "gc-replicasets", cfg.GCReplicaSets, "ReplicaSets in the GC sweep")
	flag.IntVar(&cfg.GCOrphans, "gc-orphans", cfg.GCOrphans, "true orphans among the GC revisions")
	flag.IntVar(&cfg.GCParallel, "gc-parallel", cfg.GCParallel, "deletes in flight at once in the GC sweep (0: gc.DefaultParallel, 1: serial)")
	flag.StringVar(&levels, "mem-levels", levels, "ConfigMap counts for memory and the scaling curve (empty: skip)")
	flag.IntVar(&cfg.MemBigBytes, "mem-big-bytes", cfg.MemBigBytes, "data size of a big ConfigMap")
	flag.IntVar(&cfg.CurveN, "curve-n", cfg.CurveN, "ReplicaSets per level of the latency curve")
	flag.Float64Var(&qps, "qps", qps, "client QPS of the service and the harness (burst: 2x)")
	flag.DurationVar(&cfg.Settle, "settle", cfg.Settle, "wait this long without progress before counting an ownerReference lost")
	flag.StringVar(&cfg.ResultsDir, "results", cfg.ResultsDir, "directory for the JSON report")
	flag.StringVar(&cfg.LogDir, "log-dir", cfg.LogDir, "directory for the service's and Argo Events' logs (default: temporary)")
	flag.StringVar(&cfg.GoMemLimit, "gomemlimit", cfg.GoMemLimit, "GOMEMLIMIT of the measured service, as the chart sets it (e.g. 200MiB; empty: none)")
	flag.StringVar(&rsLevels, "rs-levels", rsLevels, "ReplicaSet counts of serve's memory curve (empty: skip)")
	flag.IntVar(&cfg.RSRevisions, "rs-revisions", cfg.RSRevisions, "revisions added at the last -rs-levels level")
	flag.IntVar(&cfg.SweepNamespaces, "sweep-namespaces", cfg.SweepNamespaces, "namespaces of the sweep from the caches (0: skip)")
	flag.IntVar(&cfg.SweepRS, "sweep-rs", cfg.SweepRS, "ReplicaSets per namespace of the sweep")
	flag.IntVar(&cfg.SweepRevisions, "sweep-revisions", cfg.SweepRevisions, "revisions per namespace of the sweep (one is an orphan)")
	flag.StringVar(&clusterLevels, "cluster-levels", clusterLevels, "idle Argo CD clusters one replica serves, for the per-cluster cost rows (empty: skip)")
	flag.IntVar(&cfg.ForwardN, "forward-n", cfg.ForwardN, "events to the owner and as many forwarded, in a two-replica fleet (0: skip)")
	flag.IntVar(&cfg.FleetClusters, "fleet-clusters", cfg.FleetClusters, "idle Argo CD clusters shared by -fleet-replicas `serve --fleet --watch` replicas (0: skip)")
	flag.IntVar(&cfg.FleetReplicas, "fleet-replicas", cfg.FleetReplicas, "replicas of the fleet scenario")
	flag.IntVar(&cfg.FleetShards, "fleet-shards", cfg.FleetShards, "serve --fleet-shards of the fleet scenario (0: serve's default)")
	flag.IntVar(&cfg.LiveClusters, "live-clusters", cfg.LiveClusters, "clusters one replica serves while its start-up replay attaches -live-rs ReplicaSets in each (0: skip)")
	flag.IntVar(&cfg.LiveRS, "live-rs", cfg.LiveRS, "ReplicaSets (3 KiB templates) and unattached revisions per cluster of the live-events scenario")
	flag.IntVar(&cfg.LiveN, "live-n", cfg.LiveN, "fresh ADD events POSTed at /readyz (during the start-up replay), and as many once it is done")
	flag.Parse()
	cfg.Paths = nil
	for _, p := range strings.Split(paths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Paths = append(cfg.Paths, p)
		}
	}
	if len(cfg.Paths) == 0 {
		cfg.Paths = []string{}
	}
	var err error
	if cfg.MemLevels, err = parseInts(levels); err != nil {
		return fmt.Errorf("-mem-levels: %w", err)
	}
	if cfg.RSLevels, err = parseInts(rsLevels); err != nil {
		return fmt.Errorf("-rs-levels: %w", err)
	}
	if cfg.ClusterLevels, err = parseInts(clusterLevels); err != nil {
		return fmt.Errorf("-cluster-levels: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), int(2*qps)
	start := time.Now()
	cfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%6s] %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		fmt.Print(rep.Table())
		if rep.JSONPath != "" {
			fmt.Printf("JSON: %s\nlogs: %s\n", rep.JSONPath, rep.LogDir)
		}
	}
	return err
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		out = append(out, n)
	}
	return out, nil
}
