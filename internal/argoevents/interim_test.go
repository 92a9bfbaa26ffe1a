package argoevents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// coreTrigger is an interim, minimal stand-in for `configmap-attacher serve` built on the
// real decoder and core: enough to prove the chain attach → garbage collection with the
// real Argo Events until the trigger service (trigger/, internal/server) lands.
type coreTrigger struct {
	a *core.Attacher
}

func newCoreTrigger(c *controlplane.ControlPlane) (*coreTrigger, error) {
	cfg := c.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	a, err := core.NewAttacher(core.Config{
		Cluster: "in-cluster", Client: c.Client(),
		Reader: core.LiveReader{Client: c.Client(), Dynamic: dyn, Metadata: md},
	})
	if err != nil {
		return nil, err
	}
	return &coreTrigger{a: a}, nil
}

func (s *coreTrigger) attach(ctx context.Context, spec map[string]string, payload []byte) ([]byte, error) {
	opts, err := core.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	d, err := eventsource.Decode(payload)
	if err != nil {
		return nil, err
	}
	ev := d.Event
	ev.Options = opts
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.a.Attach(ctx, ev)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (s *coreTrigger) FetchResource(_ context.Context, r *triggers.FetchResourceRequest) (*triggers.FetchResourceResponse, error) {
	var spec map[string]string
	if err := yaml.Unmarshal(r.Resource, &spec); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "spec: %v", err)
	}
	opts, err := core.ParseSpec(spec)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out, err := json.Marshal(opts.Spec())
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &triggers.FetchResourceResponse{Resource: out}, nil
}

func (s *coreTrigger) Execute(ctx context.Context, r *triggers.ExecuteRequest) (*triggers.ExecuteResponse, error) {
	var spec map[string]string
	if err := json.Unmarshal(r.Resource, &spec); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "resource: %v", err)
	}
	out, err := s.attach(ctx, spec, r.Payload)
	if err != nil {
		if errors.Is(err, core.ErrInvalid) {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return &triggers.ExecuteResponse{Response: out}, nil
}

func (s *coreTrigger) ApplyPolicy(context.Context, *triggers.ApplyPolicyRequest) (*triggers.ApplyPolicyResponse, error) {
	return &triggers.ApplyPolicyResponse{Success: true, Message: "ok"}, nil
}

// ServeHTTP takes plain JSON resource event data with the spec in query parameters.
func (s *coreTrigger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, eventsource.MaxPayloadBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	spec := map[string]string{}
	for k, v := range r.URL.Query() {
		spec[k] = v[0]
	}
	out, err := s.attach(r.Context(), spec, body)
	switch {
	case errors.Is(err, core.ErrInvalid):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(w, fmt.Sprintf("retry: %v", err), http.StatusServiceUnavailable)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}
}
