package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
)

// sensorAlone is argo-grpc's same-run baseline: the same real eventsource-service and
// sensor-service (shipped EventSource and gRPC Sensor) with the custom trigger aimed at
// noopTrigger, which answers at once. The clock runs from the ReplicaSet's Create to
// the trigger's Execute for it, so the figures are the Argo Events pipeline's alone.
func (e *env) sensorAlone(ctx context.Context, rep *Report) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ns := "bench-argo-noop"
	n, burst := e.cfg.N, e.cfg.BurstN
	if e.cfg.ArgoN > 0 {
		n, burst = min(n, e.cfg.ArgoN), min(burst, e.cfg.ArgoN)
	}
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	t := newTracker()
	addr, stopTrigger, err := startNoopTrigger(t)
	if err != nil {
		return err
	}
	defer stopTrigger()
	stop, err := e.grpcPipeline(ctx, ns, addr, "argo-events-noop")
	if err != nil {
		return err
	}
	defer stop()
	if err := e.warmUp(ctx, t, ns); err != nil {
		return err
	}
	time.Sleep(time.Second) // as on the paths
	res := &PathResult{Name: "argo-grpc-noop", Rate: e.cfg.Rate,
		Note: "real Argo Events eventsource-service -> JetStream -> sensor-service -> no-op gRPC trigger in the harness (one ReplicaSet sent first; clock: Create -> Execute)"}
	names, err := e.createReplicaSets(ctx, t, ns, "rs", "cm", 0, n, e.cfg.Rate, 0)
	if err != nil {
		return err
	}
	res.Paced = t.result(names)
	if burst > 0 {
		if names, err = e.createReplicaSets(ctx, t, ns, "rs", "cm", n, n+burst, 0, e.cfg.BurstWorkers); err != nil {
			return err
		}
		res.Burst = t.result(names)
	}
	rep.SensorAlone = res
	e.cfg.Logf("   sensor alone: paced %d at %.0f/s p50/p95/p99 %s (lost %d); burst %d created at %.0f/s, triggered at %.0f/s, drain %s",
		n, e.cfg.Rate, res.Paced.Latency, res.Paced.Lost, burst, res.Burst.CreateRate, res.Burst.AttachRate, fmtMs(res.Burst.DrainMs))
	return nil
}

// noopTrigger is Argo Events' own Trigger service (the generated server of
// pkg/sensors/triggers, as the service's trigger package serves it) doing nothing:
// FetchResource echoes the spec, Execute records when it saw each ReplicaSet, keyed
// by the ConfigMap its template references as the tracker expects, and ApplyPolicy
// succeeds.
type noopTrigger struct {
	t *tracker
}

var _ triggers.TriggerServer = (*noopTrigger)(nil)

func (n *noopTrigger) FetchResource(_ context.Context, req *triggers.FetchResourceRequest) (*triggers.FetchResourceResponse, error) {
	return &triggers.FetchResourceResponse{Resource: req.GetResource()}, nil
}

func (n *noopTrigger) Execute(_ context.Context, req *triggers.ExecuteRequest) (*triggers.ExecuteResponse, error) {
	if cm, err := triggeredConfigMap(req.GetPayload()); err == nil {
		n.t.observe(cm)
	}
	return &triggers.ExecuteResponse{Response: []byte("{}")}, nil
}

func (n *noopTrigger) ApplyPolicy(context.Context, *triggers.ApplyPolicyRequest) (*triggers.ApplyPolicyResponse, error) {
	return &triggers.ApplyPolicyResponse{Success: true}, nil
}

// startNoopTrigger serves a noopTrigger feeding t on a free loopback port.
func startNoopTrigger(t *tracker) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("no-op trigger: %w", err)
	}
	srv := grpc.NewServer()
	triggers.RegisterTriggerServer(srv, &noopTrigger{t: t})
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), srv.Stop, nil
}

// triggeredConfigMap reads the custom trigger's payload (the shipped Sensor's mapping
// of Argo Events' resource event data) and returns the ConfigMap the ReplicaSet's first
// container takes through envFrom: the bench's fixture keys each ReplicaSet by it.
func triggeredConfigMap(payload []byte) (string, error) {
	var ev struct {
		Body *appsv1.ReplicaSet `json:"body"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		return "", fmt.Errorf("trigger payload: %w", err)
	}
	if ev.Body == nil || len(ev.Body.Spec.Template.Spec.Containers) == 0 {
		return "", errors.New("trigger payload: no ReplicaSet with a container in body")
	}
	for _, f := range ev.Body.Spec.Template.Spec.Containers[0].EnvFrom {
		if f.ConfigMapRef != nil && f.ConfigMapRef.Name != "" {
			return f.ConfigMapRef.Name, nil
		}
	}
	return "", errors.New("trigger payload: the first container has no envFrom ConfigMap")
}
