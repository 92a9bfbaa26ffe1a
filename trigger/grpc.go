package trigger

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
)

// MaxGRPCMessageBytes bounds a gRPC request (spec plus payload).
const MaxGRPCMessageBytes = event.MaxPayloadBytes + MaxSpecBytes + 4096

// GRPCServer serves Argo Events' custom trigger protocol (the Trigger service) over a
// listener, plus the standard gRPC health service.
type GRPCServer struct {
	lis      net.Listener
	srv      *grpc.Server
	health   *health.Server
	shutdown time.Duration
}

// GRPCOptions configure a GRPCServer.
type GRPCOptions struct {
	// TLS, when set, serves TLS (what a Sensor with secure: true and certSecret dials).
	TLS *tls.Config
	// ShutdownTimeout bounds the graceful stop; zero means 30s.
	ShutdownTimeout time.Duration
}

// NewGRPCServer returns a server for d on lis. Run serves it.
func NewGRPCServer(d Dispatcher, lis net.Listener, o GRPCOptions) *GRPCServer {
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxGRPCMessageBytes)}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	s := &GRPCServer{lis: lis, srv: grpc.NewServer(opts...), health: health.NewServer(), shutdown: o.ShutdownTimeout}
	triggers.RegisterTriggerServer(s.srv, &triggerServer{d: d})
	healthpb.RegisterHealthServer(s.srv, s.health)
	return s
}

// Addr returns the listener's address.
func (s *GRPCServer) Addr() net.Addr { return s.lis.Addr() }

// Run serves until ctx ends, then stops gracefully: new calls are refused, calls in
// flight finish (bounded by the shutdown timeout). It returns nil after a clean stop and
// the serving error otherwise.
func (s *GRPCServer) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("gRPC server on %s: %w", s.lis.Addr(), err)
	case <-ctx.Done():
	}
	s.health.Shutdown()
	done := make(chan struct{})
	go func() { s.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.shutdown):
		s.srv.Stop()
		<-done
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("gRPC server on %s: %w", s.lis.Addr(), err)
	}
	return nil
}

// triggerServer implements triggers.TriggerServer over the dispatcher.
type triggerServer struct {
	d Dispatcher
}

var _ triggers.TriggerServer = (*triggerServer)(nil)

// FetchResource validates the custom trigger spec (YAML or JSON) and returns the
// normalised spec as JSON (every key with its effective value on this service), so that
// the Sensor's parameters can be applied to it. A bad spec is InvalidArgument naming
// the key.
func (t *triggerServer) FetchResource(ctx context.Context, req *triggers.FetchResourceRequest) (*triggers.FetchResourceResponse, error) {
	opts, err := ParseSpec(req.GetResource(), t.d.ParseSpec)
	if err != nil {
		return nil, GRPCError(t.d.Reject(ctx, dispatch.PathGRPC, core.Event{}, err))
	}
	b, err := NormalizedSpec(opts)
	if err != nil {
		return nil, GRPCError(dispatch.Failure(dispatch.ClassFailed, err))
	}
	return &triggers.FetchResourceResponse{Resource: b}, nil
}

// Execute runs one event: resource is the normalised spec (after the Sensor's
// parameters), payload the event in any form event.Decode accepts. The response is a
// dispatch.Response as JSON. A non-ADD event is acknowledged as ignored. Errors: the
// answer's class as a gRPC code (GRPCError, one table). An unclassified failure of some object is
// not an error here: the response reports it and ApplyPolicy fails.
func (t *triggerServer) Execute(ctx context.Context, req *triggers.ExecuteRequest) (*triggers.ExecuteResponse, error) {
	opts, err := ParseSpec(req.GetResource(), t.d.ParseSpec)
	if err != nil {
		return nil, GRPCError(t.d.Reject(ctx, dispatch.PathGRPC, core.Event{}, err))
	}
	var a dispatch.Answer
	if dec, err := event.Decode(req.GetPayload()); err != nil {
		a = t.d.Reject(ctx, dispatch.PathGRPC, dec.Event, err)
	} else {
		a = t.d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathGRPC, Options: opts, Event: dec.CoreEvent()})
	}
	if !answered(a) {
		return nil, GRPCError(a)
	}
	b, err := json.Marshal(a.Response)
	if err != nil {
		return nil, GRPCError(dispatch.Failure(dispatch.ClassFailed, fmt.Errorf("encoding the result: %w", err)))
	}
	return &triggers.ExecuteResponse{Response: b}, nil
}

// ApplyPolicy receives Execute's response: success iff no object ended with an error;
// the message summarises the outcome counts. A request that is not a Response is
// InvalidArgument.
func (t *triggerServer) ApplyPolicy(ctx context.Context, req *triggers.ApplyPolicyRequest) (*triggers.ApplyPolicyResponse, error) {
	var resp dispatch.Response
	if err := json.Unmarshal(req.GetRequest(), &resp); err != nil {
		return nil, GRPCError(dispatch.Failure(dispatch.ClassInvalid, core.Invalidf("request", "not an Execute response: %s", core.Clip(err.Error()))))
	}
	if resp.Ignored != "" {
		return &triggers.ApplyPolicyResponse{Success: true, Message: "ignored: " + resp.Ignored}, nil
	}
	failed := resp.Failed() || resp.Error != ""
	msg := resp.Summary()
	if resp.Error != "" {
		msg += "; error: " + resp.Error
	}
	if failed {
		var names []string
		for _, o := range resp.Objects {
			if o.Outcome == core.OutcomeError {
				names = append(names, string(o.Kind)+"/"+o.Name)
			}
		}
		if len(names) > 0 {
			msg += "; failed: " + strings.Join(names, ", ")
		}
	}
	return &triggers.ApplyPolicyResponse{Success: !failed, Message: msg}, nil
}
