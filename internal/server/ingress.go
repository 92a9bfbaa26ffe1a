package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/sensor"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// Ingress configures what runs next to the gRPC trigger and the HTTP receiver: the
// built-in ReplicaSet watcher, the direct EventBus subscription and the periodic orphan
// sweep. The zero value runs none of them.
type Ingress struct {
	// Watch runs the built-in ReplicaSet watcher (single-cluster mode only).
	Watch bool
	// WatchResync is the watcher's full resync period (eventsource.WatcherOptions.Resync).
	WatchResync time.Duration
	// EventBus, when set, subscribes to the Argo Events EventBus; events are routed
	// through the server's clusters.
	EventBus *sensor.Options
	// GC configures the orphan sweeper (single-cluster mode only): trigger events with
	// `operation: gc` use it; with a positive Interval it also sweeps periodically and
	// after attaches. Nil means defaults and no periodic sweep.
	GC *GCOptions
}

// GCOptions configure the periodic orphan sweep of `serve`.
type GCOptions struct {
	// Interval between periodic sweeps; zero means no periodic sweep.
	Interval time.Duration
	// Options are the planner's MinAge and Keep.
	Options gc.Options
	// LeaseNamespace, when set, elects one sweeper among the replicas on a Lease there.
	LeaseNamespace string
	// DryRun logs what each sweep would delete and deletes nothing.
	DryRun bool
}

// RunWith runs the server (Run) and the ingress paths in to it until ctx ends or one of
// them fails, then shuts all down. Errors: an ingress that cannot be built (bad options,
// ErrInvalid), or the first component failure.
func (s *Server) RunWith(ctx context.Context, in Ingress) error {
	var runners []func(context.Context) error
	if in.Watch || (in.GC != nil && in.GC.Interval > 0) {
		if s.opts.Clusters != nil {
			return core.Invalidf("watch", "the built-in watcher and the periodic sweep serve one cluster; with several clusters use the EventBus subscription and `configmap-attacher gc`")
		}
	}
	var att *core.Attacher
	if s.cache != nil {
		var err error
		att, err = s.clusterAttacher()
		if err != nil {
			return err
		}
	}
	if in.Watch {
		w, err := eventsource.NewWatcher(s.cache.ReplicaSetInformer(), att, eventsource.WatcherOptions{
			Cluster: s.opts.ClusterName, Resync: in.WatchResync, Logger: s.log})
		if err != nil {
			return err
		}
		runners = append(runners, w.Run)
	}
	if in.EventBus != nil {
		o := *in.EventBus
		if o.Logger == nil {
			o.Logger = s.log
		}
		if o.Registerer == nil {
			o.Registerer = s.svc.Metrics().Registry
		}
		routes, err := s.routes()
		if err != nil {
			return err
		}
		sub, err := sensor.NewSubscriber(o, routes)
		if err != nil {
			return err
		}
		runners = append(runners, sub.Run)
	}
	if att != nil {
		// The sweeper serves trigger events with `operation: gc` always, and runs
		// periodically (and after attaches) only when GC is configured.
		gco := GCOptions{Options: gc.DefaultOptions()}
		if in.GC != nil {
			gco = *in.GC
		}
		sw, err := s.sweeper(att, gco)
		if err != nil {
			return err
		}
		var after trigger.AfterAttachFunc
		if gco.Interval > 0 {
			after = func(_, ns string) { sw.Trigger(ns) }
			runners = append(runners, sw.Run)
		}
		s.svc.SetSweeper(sweepFunc(sw), after)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.Run(gctx) })
	for _, r := range runners {
		g.Go(func() error {
			// Ingress paths start once the caches are in sync, so their first reads hit.
			if s.cache != nil {
				if err := s.cache.WaitForSync(gctx); err != nil {
					return nil
				}
			}
			return r(gctx)
		})
	}
	return g.Wait()
}

// sweepFunc adapts a Sweeper to the trigger's `operation: gc`.
func sweepFunc(sw *gc.Sweeper) trigger.SweepFunc {
	return func(ctx context.Context, _ string, ns string, dryRun bool) (any, string, error) {
		run := sw.SweepNamespace
		if dryRun {
			run = sw.SweepNamespaceDryRun
		}
		rep, err := run(ctx, ns)
		if rep == nil {
			return nil, "", err
		}
		counts := map[gc.Outcome]int{}
		for _, r := range rep.Results {
			counts[r.Outcome]++
		}
		keys := make([]string, 0, len(counts))
		for o := range counts {
			keys = append(keys, string(o))
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%d %s", counts[gc.Outcome(k)], k))
		}
		summary := fmt.Sprintf("gc %s: %s", ns, strings.Join(parts, ", "))
		if len(parts) == 0 {
			summary = fmt.Sprintf("gc %s: no revisions", ns)
		}
		return rep, summary, err
	}
}

// routes is where the EventBus subscription sends events: the registry, or this
// server's single cluster.
func (s *Server) routes() (sensor.Clusters, error) {
	if s.opts.Clusters != nil {
		return s.opts.Clusters, nil
	}
	att, err := s.clusterAttacher()
	if err != nil {
		return nil, err
	}
	return trigger.NewSingleCluster(s.opts.ClusterName, att)
}

// clusterAttacher returns the one Attacher every single-cluster ingress path shares, so
// that work on one object is serialised across paths.
func (s *Server) clusterAttacher() (*core.Attacher, error) {
	if s.att == nil {
		return nil, errors.New("server: no single-cluster Attacher (multi-cluster mode)")
	}
	return s.att, nil
}

func (s *Server) sweeper(att *core.Attacher, o GCOptions) (*gc.Sweeper, error) {
	metrics, err := gc.NewMetrics(s.svc.Metrics().Registry)
	if err != nil {
		return nil, fmt.Errorf("gc metrics: %w", err)
	}
	recorder, stopRecorder := kube.NewBroadcastRecorder(s.clients.Kube)
	cfg := gc.Config{Cluster: s.opts.ClusterName, Client: s.clients.Kube, Attacher: att, AllowSecrets: s.opts.AllowSecrets,
		Source:   gc.LiveSource{Client: s.clients.Kube, Dynamic: s.clients.Dynamic, Metadata: s.clients.Metadata, IncludeSecrets: s.opts.AllowSecrets},
		Recorder: recorder, Metrics: metrics, Logger: s.log, Options: o.Options, Interval: o.Interval, DryRun: o.DryRun}
	if s.opts.Namespace != "" {
		// A namespaced install (Role, not ClusterRole) may only list its own namespace.
		cfg.Namespaces = []string{s.opts.Namespace}
	}
	if o.LeaseNamespace != "" {
		cfg.LeaderElection = &gc.LeaderElection{Client: s.clients.Kube, Namespace: o.LeaseNamespace}
	}
	sw, err := gc.NewSweeper(cfg)
	if err != nil {
		stopRecorder()
		return nil, err
	}
	return sw, nil
}
