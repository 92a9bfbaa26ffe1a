package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// FloorResult is the bare PATCH over a warm client.
type FloorResult struct {
	// RTT of the PATCH call; Visible from before the PATCH to the watch seeing it.
	RTT     Latency `json:"rtt"`
	Visible Latency `json:"visible"`
	Cost    cost    `json:"cost"`
}

// floor PATCHes FloorN ConfigMaps, one at a time, each with an ownerReference to a live
// ReplicaSet: the least any attach can cost.
func (e *env) floor(ctx context.Context, rep *Report) error {
	ns := "bench-floor"
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	f, err := e.measureFloor(ctx, ns, "floor", e.cfg.FloorN)
	if err != nil {
		return err
	}
	rep.Floor = f
	e.cfg.Logf("   floor: PATCH p50/p95/p99 %s, visible %s", f.RTT, f.Visible)
	return nil
}

// measureFloor creates n ConfigMaps prefix-0.. and an owner ReplicaSet in ns, then
// PATCHes each with an ownerReference, one at a time over a warm client.
func (e *env) measureFloor(ctx context.Context, ns, prefix string, n int) (*FloorResult, error) {
	owner, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, prefix+"-owner", prefix+"-0"), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the floor owner: %w", err)
	}
	uids := make([]types.UID, n)
	if err := parallel(ctx, 0, n, 16, func(ctx context.Context, i int) error {
		cm, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, revision(ns, fmt.Sprintf("%s-%d", prefix, i), 0, nil), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating ConfigMap: %w", err)
		}
		uids[i] = cm.UID
		return nil
	}); err != nil {
		return nil, err
	}
	t, err := e.track(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer t.stop()
	for i := 0; i < 20; i++ { // warm the connection
		if _, err := e.kc.CoreV1().ConfigMaps(ns).Get(ctx, prefix+"-0", metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("warming up: %w", err)
		}
	}
	no := false
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner.Name, UID: owner.UID, Controller: &no}
	m0, err := e.metrics.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var rtt []float64
	names := make([]string, n)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uids[i], "ownerReferences": []metav1.OwnerReference{ref}}})
		if err != nil {
			return nil, err
		}
		s := t.expect(names[i])
		start := time.Now()
		if _, err := e.kc.CoreV1().ConfigMaps(ns).Patch(ctx, names[i], types.StrategicMergePatchType, patch,
			metav1.PatchOptions{FieldManager: core.FieldManager}); err != nil {
			return nil, fmt.Errorf("floor PATCH: %w", err)
		}
		rtt = append(rtt, ms(time.Since(start)))
		t.created(s)
	}
	t.wait(ctx, names, e.cfg.Settle)
	m1, err := e.metrics.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r := t.result(names)
	return &FloorResult{RTT: percentiles(rtt), Visible: r.Latency, Cost: costOf(m1.since(m0), n)}, nil
}

// PathResult is one ingress path.
type PathResult struct {
	Name string `json:"name"`
	// Paced: N ReplicaSets at Rate per second. Burst: BurstN as fast as possible.
	Rate   float64   `json:"rate"`
	Paced  runResult `json:"paced"`
	Burst  runResult `json:"burst"`
	Cost   cost      `json:"cost"`
	Replay *Replay   `json:"replay,omitempty"`
	Note   string    `json:"note,omitempty"`
	// PatchStrategy and Semantics: the argo-k8s baseline only.
	PatchStrategy string        `json:"patchStrategy,omitempty"`
	Semantics     *K8sSemantics `json:"semantics,omitempty"`
}

// Replay is the cost of ADD events for ReplicaSets that are already attached.
type Replay struct {
	Events   int     `json:"events"`
	Seconds  float64 `json:"seconds"`
	Failures int     `json:"failures"`
	Cost     cost    `json:"cost"`
}

// path measures one ingress path: the service runs with only that path feeding it,
// watching only the path's namespace.
func (e *env) path(ctx context.Context, name string, rep *Report) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kind, senders, err := httpSenders(name, e.cfg.HTTPSenders)
	if err != nil {
		return err
	}
	ns := "bench-" + strings.ReplaceAll(name, ":", "-")
	n, burst := e.cfg.N, e.cfg.BurstN
	if (name == "argo-grpc" || name == "argo-k8s") && e.cfg.ArgoN > 0 {
		n, burst = min(n, e.cfg.ArgoN), min(burst, e.cfg.ArgoN)
	}
	if name == "argo-k8s" && e.cfg.ArgoK8sN > 0 {
		n, burst = min(n, e.cfg.ArgoK8sN), min(burst, e.cfg.ArgoK8sN)
	}
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	if err := e.createRevisions(ctx, ns, "cm", 0, n+burst, 0); err != nil {
		return err
	}
	t, err := e.track(ctx, ns)
	if err != nil {
		return err
	}
	defer t.stop()
	res := &PathResult{Name: name, Rate: e.cfg.Rate}
	var svc *service
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	base := []string{"--watch-namespace", ns}
	switch kind {
	case "watcher":
		args := append(base, "--watch")
		if e.cfg.WatchWorkers > 0 {
			args = append(args, "--watch-workers", strconv.Itoa(e.cfg.WatchWorkers))
		}
		if svc, err = e.startService(ctx, name, args...); err != nil {
			return err
		}
		res.Note = "serve " + strings.Join(args[2:], " ") + " (informer event -> core)"
	case "eventbus":
		// The source creates the stream the subscription needs.
		src, err := e.source(ctx, e.nats, ns, "bench-"+name)
		if err != nil {
			return err
		}
		if svc, err = e.startService(ctx, name, append(base, "--eventbus-url", e.nats.ClientURL(), "--eventbus-tls-ca-file", e.nats.CAFile(),
			"--eventbus-event-source", "bench-"+name, "--eventbus-durable", "bench-"+name)...); err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = src.Run(ctx) }()
		res.Note = "in-process resource EventSource (Argo Events format) -> JetStream -> serve --eventbus-url"
	case "http":
		if svc, err = e.startService(ctx, name, base...); err != nil {
			return err
		}
		if err := e.httpFeeder(ctx, &wg, ns, svc.httpAddr, senders); err != nil {
			return err
		}
		res.Note = fmt.Sprintf("harness watch -> POST structured CloudEvent (%d at once) -> serve HTTP receiver", senders)
	case "argo-grpc":
		if svc, err = e.startService(ctx, name, base...); err != nil {
			return err
		}
		stop, err := e.grpcPipeline(ctx, ns, svc.grpcAddr, "argo-events")
		if err != nil {
			svc.stop()
			return err
		}
		defer stop()
		if err := e.warmUp(ctx, t, ns); err != nil {
			svc.stop()
			return err
		}
		res.Note = "real Argo Events eventsource-service -> JetStream -> sensor-service -> gRPC custom trigger (one ReplicaSet sent first)"
	case "argo-k8s":
		// The no-code alternative: no configmap-attacher at all, Argo Events' own k8s
		// trigger patches the ConfigMap from the event payload.
		bus, err := natsserver.Start(ctx, natsserver.Options{})
		if err != nil {
			return fmt.Errorf("NATS for Argo Events: %w", err)
		}
		defer bus.Stop()
		strategy := e.cfg.ArgoK8sPatch
		if strategy == "" {
			strategy = argoevents.PatchMerge
		}
		sensor, err := argoevents.K8sPatchSensor(strategy)
		if err != nil {
			return err
		}
		logDir := filepath.Join(e.logDir, "argo-events-k8s")
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return fmt.Errorf("argo events log dir: %w", err)
		}
		pipe, err := argoevents.StartPipeline(ctx, argoevents.PipelineOptions{EventBusURL: bus.ClientURL(), Kubeconfig: e.cp.Kubeconfig(),
			Namespace: ns, Sensors: []*v1alpha1.Sensor{sensor}, LogDir: logDir})
		if err != nil {
			return err
		}
		defer func() { _ = pipe.Stop() }()
		res.Note = "real Argo Events eventsource-service -> JetStream -> sensor-service standard k8s trigger (operation: patch, " + strategy + "); no configmap-attacher"
		res.PatchStrategy = strategy
	default:
		return fmt.Errorf("unknown ingress path %q (want watcher, eventbus, http, http:SENDERS, argo-grpc, argo-k8s)", name)
	}
	defer svc.stop()
	// Let the feeder's watch settle before the clock starts.
	time.Sleep(time.Second)
	m0, err := e.metrics.snapshot(ctx)
	if err != nil {
		return err
	}
	names, err := e.createReplicaSets(ctx, t, ns, "rs", "cm", 0, n, e.cfg.Rate, 0)
	if err != nil {
		return err
	}
	res.Paced = t.result(names)
	m1, err := e.metrics.snapshot(ctx)
	if err != nil {
		return err
	}
	res.Cost = costOf(m1.since(m0), n)
	e.cfg.Logf("   %s paced: %d at %.0f/s, lost %d, p50/p95/p99 %s", name, n, e.cfg.Rate, res.Paced.Lost, res.Paced.Latency)
	if burst > 0 {
		names, err = e.createReplicaSets(ctx, t, ns, "rs", "cm", n, n+burst, 0, e.cfg.BurstWorkers)
		if err != nil {
			return err
		}
		res.Burst = t.result(names)
		e.cfg.Logf("   %s burst: %d created at %.0f/s, attached at %.0f/s, lost %d, lag p99 %s", name, burst,
			res.Burst.CreateRate, res.Burst.AttachRate, res.Burst.Lost, fmtMs(res.Burst.Latency.P99))
	}
	if name == "argo-k8s" {
		if res.Semantics, err = e.k8sSemantics(ctx, ns); err != nil {
			return fmt.Errorf("argo-k8s semantics: %w", err)
		}
	}
	if kind == "http" && e.cfg.ReplayN > 0 {
		if res.Replay, err = e.replay(ctx, ns, svc.httpAddr, min(e.cfg.ReplayN, n+burst)); err != nil {
			return err
		}
	}
	rep.Paths = append(rep.Paths, res)
	return nil
}

// httpSenders splits a path name: "http:N" is the http path with N senders, any other
// name is itself with def.
func httpSenders(name string, def int) (kind string, senders int, err error) {
	k, n, ok := strings.Cut(name, ":")
	if !ok {
		return name, def, nil
	}
	if senders, err = strconv.Atoi(n); k != "http" || err != nil || senders < 1 {
		return "", 0, fmt.Errorf("ingress path %q: only http takes a sender count (http:N, N >= 1)", name)
	}
	return k, senders, nil
}

// grpcPipeline starts a NATS EventBus of its own and the real Argo Events pipeline: the
// shipped EventSource narrowed to ns and the shipped gRPC Sensor aimed at target
// (host:port; split in Config.ArgoLanes lanes, laneSensor), logging under logName.
// stop ends both.
func (e *env) grpcPipeline(ctx context.Context, ns, target, logName string) (stop func(), err error) {
	bus, err := natsserver.Start(ctx, natsserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("NATS for Argo Events: %w", err)
	}
	logDir := filepath.Join(e.logDir, logName)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		bus.Stop()
		return nil, fmt.Errorf("argo events log dir: %w", err)
	}
	o := argoevents.PipelineOptions{EventBusURL: bus.ClientURL(), Kubeconfig: e.cp.Kubeconfig(), Namespace: ns, GRPCServer: target, LogDir: logDir}
	if e.cfg.ArgoLanes > 1 {
		s, err := e.gRPCSensor(target)
		if err != nil {
			bus.Stop()
			return nil, err
		}
		o.GRPCServer, o.Sensors = "", []*v1alpha1.Sensor{s}
	}
	pipe, err := argoevents.StartPipeline(ctx, o)
	if err != nil {
		bus.Stop()
		return nil, err
	}
	return func() { _ = pipe.Stop(); bus.Stop() }, nil
}

// warmUp sends one ReplicaSet (warm-0, referencing the revision warm-0) through a
// path and waits for it, so that the clock starts with the path's connections made:
// sensor-service dials the custom trigger's server on its first event and polls for
// the connection with a backoff (about 2 s), and the events behind it queue.
func (e *env) warmUp(ctx context.Context, t *tracker, ns string) error {
	if err := e.createRevisions(ctx, ns, "warm", 0, 1, 0); err != nil {
		return err
	}
	names, err := e.createReplicaSets(ctx, t, ns, "warm", "warm", 0, 1, 0, 1)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if r := t.result(names); r.Lost > 0 {
		return fmt.Errorf("warm-up: ReplicaSet %s/warm-0 not seen within %s", ns, e.cfg.Settle)
	}
	return nil
}

// source is the in-process resource EventSource publishing ReplicaSet ADDs of ns.
func (e *env) source(ctx context.Context, bus *natsserver.Server, ns, esName string) (*eventsource.Source, error) {
	nc, err := bus.Connect()
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	go func() { <-ctx.Done(); nc.Close() }()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	// What the Argo Events EventBus controller creates.
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: eventbus.DefaultStream, Subjects: []string{eventbus.SubjectPrefix + ">"},
		MaxAge: 168 * time.Hour, Duplicates: 5 * time.Minute}); err != nil {
		return nil, fmt.Errorf("creating the EventBus stream: %w", err)
	}
	clients, err := kube.NewClients(e.rest)
	if err != nil {
		return nil, err
	}
	return eventsource.NewSource(clients.Kube, &eventsource.Publisher{JS: js}, eventsource.SourceOptions{
		EventSourceName: esName, EventName: "replicaset-add", Namespace: ns, Metadata: map[string]string{"cluster": "in-cluster"},
		Workers: 8, Logger: e.log})
}

// postEvent POSTs the structured CloudEvent of an ADD for rs of cluster c.
func postEvent(ctx context.Context, client *http.Client, addr, c string, rs *appsv1.ReplicaSet) error {
	status, b, err := postAnswer(ctx, client, addr, c, rs)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("POST event: %d: %s", status, b)
	}
	return nil
}

// postAnswer POSTs the ADD of rs of cluster c and returns the answer's status and the
// start of its body.
func postAnswer(ctx context.Context, client *http.Client, addr, c string, rs *appsv1.ReplicaSet) (int, []byte, error) {
	_, body, err := event.ResourceEvent("bench-http", "replicaset-add", "ADD", rs, map[string]string{"cluster": c})
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/cloudevents+json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("POST event: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, b, nil
}

// httpFeeder watches ReplicaSets in ns and POSTs an ADD CloudEvent for each
// (senders at once, retried on 429/5xx), as Argo Events' HTTP trigger would.
func (e *env) httpFeeder(ctx context.Context, wg *sync.WaitGroup, ns, addr string, senders int) error {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	f := informers.NewSharedInformerFactoryWithOptions(e.kc, 0, informers.WithNamespace(ns))
	inf := f.Apps().V1().ReplicaSets().Informer()
	sem := make(chan struct{}, senders)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		rs, ok := obj.(*appsv1.ReplicaSet)
		if !ok {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
				if err := postEvent(ctx, client, addr, "in-cluster", rs); err == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}}); err != nil {
		return fmt.Errorf("http feeder: %w", err)
	}
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("http feeder: ReplicaSet watch did not sync: %w", ctx.Err())
	}
	return nil
}

// replay POSTs an ADD for n already-attached ReplicaSets of ns and counts the requests.
func (e *env) replay(ctx context.Context, ns, addr string, n int) (*Replay, error) {
	list, err := e.kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets: %w", err)
	}
	if len(list.Items) < n {
		n = len(list.Items)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	m0, err := e.metrics.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var mu sync.Mutex
	failures := 0
	_ = parallel(ctx, 0, n, 8, func(ctx context.Context, i int) error {
		if err := postEvent(ctx, client, addr, "in-cluster", &list.Items[i]); err != nil {
			mu.Lock()
			failures++
			mu.Unlock()
		}
		return nil
	})
	r := &Replay{Events: n, Seconds: time.Since(start).Seconds(), Failures: failures}
	m1, err := e.metrics.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r.Cost = costOf(m1.since(m0), n)
	e.cfg.Logf("   replay: %d ADD events in %.1fs, %d failed, writes/event %.3f, GETs/event %.3f", n, r.Seconds, failures,
		r.Cost.WritesPerEvent, r.Cost.GetsPerEvent)
	return r, nil
}

// LegacyResult is the old one-shot Job: a fresh process per deploy.
type LegacyResult struct {
	N       int       `json:"n"`
	Latency runResult `json:"latency"`
	// Process is the wall time of the one-shot process.
	Process Latency `json:"process"`
	Cost    cost    `json:"cost"`
	Failed  int     `json:"failed"`
}

// legacy runs the old Job's form (`configmap-attacher -rollout R -namespace N
// -configmaps C`) as a fresh process for each of LegacyN Rollout revisions, started the
// moment the ReplicaSet is created (as a Sync hook would be).
func (e *env) legacy(ctx context.Context, rep *Report) error {
	ns := "bench-legacy"
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(e.rest)
	if err != nil {
		return err
	}
	t, err := e.track(ctx, ns)
	if err != nil {
		return err
	}
	defer t.stop()
	n := e.cfg.LegacyN
	rollouts := make([]*unstructured.Unstructured, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("ro-%d", i)
		hash := fmt.Sprintf("h%d", i)
		ro := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"replicas": int64(0),
				"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.invalid/app:1"}}}},
				"strategy": map[string]any{"canary": map[string]any{}}}}}
		created, err := dc.Resource(core.RolloutGVR).Namespace(ns).Create(ctx, ro, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Rollout: %w", err)
		}
		// What the Rollout controller reports once it made the ReplicaSet.
		_ = unstructured.SetNestedField(created.Object, fmt.Sprint(created.GetGeneration()), "status", "observedGeneration")
		_ = unstructured.SetNestedField(created.Object, hash, "status", "currentPodHash")
		if rollouts[i], err = dc.Resource(core.RolloutGVR).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("Rollout status: %w", err)
		}
		if _, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, revision(ns, "legacy-"+fmt.Sprint(i), 0, nil), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ConfigMap: %w", err)
		}
	}
	yes := true
	m0, err := e.metrics.snapshot(ctx)
	if err != nil {
		return err
	}
	res := &LegacyResult{N: n}
	var proc []float64
	names := make([]string, n)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		ro := rollouts[i]
		hash := fmt.Sprintf("h%d", i)
		names[i] = fmt.Sprintf("legacy-%d", i)
		rs := replicaSet(ns, ro.GetName()+"-"+hash, names[i])
		rs.Labels = map[string]string{"app": ro.GetName(), "rollouts-pod-template-hash": hash}
		rs.Spec.Selector.MatchLabels, rs.Spec.Template.Labels = rs.Labels, rs.Labels
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: ro.GetName(),
			UID: ro.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}
		s := t.expect(names[i])
		if _, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ReplicaSet: %w", err)
		}
		t.created(s)
		start := time.Now()
		cmd := exec.CommandContext(ctx, e.cfg.Binary, "-rollout", ro.GetName(), "-namespace", ns, "-configmaps", names[i],
			"-kubeconfig", e.cp.Kubeconfig(), "-timeout", "60s")
		cmd.Env = append(os.Environ(), "LOG_LEVEL=warn")
		if out, err := cmd.CombinedOutput(); err != nil {
			res.Failed++
			e.cfg.Logf("   legacy %s: %v: %s", ro.GetName(), err, bytes.TrimSpace(out))
		}
		proc = append(proc, ms(time.Since(start)))
	}
	t.wait(ctx, names, e.cfg.Settle)
	m1, err := e.metrics.snapshot(ctx)
	if err != nil {
		return err
	}
	res.Latency = t.result(names)
	res.Process = percentiles(proc)
	res.Cost = costOf(m1.since(m0), n)
	rep.Legacy = res
	e.cfg.Logf("   legacy: %d deploys, p50/p95/p99 %s, GETs/deploy %.1f", n, res.Latency.Latency, res.Cost.GetsPerEvent)
	return nil
}
