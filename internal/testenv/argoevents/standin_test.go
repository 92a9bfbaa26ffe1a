package argoevents_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// standInTrigger is a minimal Argo Events custom-trigger gRPC server that records calls.
type standInTrigger struct {
	mu       sync.Mutex
	specs    []string // FetchResource request bodies (YAML)
	payloads [][]byte // Execute payloads
	policies int
}

func (s *standInTrigger) FetchResource(_ context.Context, r *triggers.FetchResourceRequest) (*triggers.FetchResourceResponse, error) {
	js, err := yaml.YAMLToJSON(r.Resource)
	if err != nil {
		return nil, fmt.Errorf("spec is not YAML: %w", err)
	}
	s.mu.Lock()
	s.specs = append(s.specs, string(r.Resource))
	s.mu.Unlock()
	return &triggers.FetchResourceResponse{Resource: js}, nil
}

func (s *standInTrigger) Execute(_ context.Context, r *triggers.ExecuteRequest) (*triggers.ExecuteResponse, error) {
	s.mu.Lock()
	s.payloads = append(s.payloads, r.Payload)
	s.mu.Unlock()
	return &triggers.ExecuteResponse{Response: []byte(`{"attached":0}`)}, nil
}

func (s *standInTrigger) ApplyPolicy(context.Context, *triggers.ApplyPolicyRequest) (*triggers.ApplyPolicyResponse, error) {
	s.mu.Lock()
	s.policies++
	s.mu.Unlock()
	return &triggers.ApplyPolicyResponse{Success: true, Message: "ok"}, nil
}

func (s *standInTrigger) snapshot() (specs []string, payloads [][]byte, policies int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.specs...), append([][]byte(nil), s.payloads...), s.policies
}

// standInHTTP records the bodies Argo Events' HTTP trigger posts.
type standInHTTP struct {
	mu     sync.Mutex
	bodies [][]byte
	ctypes []string
	query  []string
	auth   []string
}

func (h *standInHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.bodies = append(h.bodies, b)
	h.ctypes = append(h.ctypes, r.Header.Get("Content-Type"))
	h.query = append(h.query, r.URL.RawQuery)
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"attached":0}`))
}

func (h *standInHTTP) snapshot() (bodies [][]byte, ctypes, query, auth []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.bodies...), append([]string(nil), h.ctypes...), append([]string(nil), h.query...),
		append([]string(nil), h.auth...)
}

// listen opens a loopback listener on a free port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestHarnessWithStandIns proves the harness itself with stand-ins for configmap-attacher:
// the real eventsource-service publishes a ReplicaSet ADD to JetStream, and the real
// sensor-service runs both shipped Sensors, whose triggers reach a stand-in gRPC trigger
// server and a stand-in HTTP receiver with the payload the shipped mapping builds (and
// the bearer token the HTTP Sensor's secureHeaders read from their Secret).
func TestHarnessWithStandIns(t *testing.T) {
	e := newEnv(t)

	grpcLn := listen(t)
	standIn := &standInTrigger{}
	gs := grpc.NewServer()
	triggers.RegisterTriggerServer(gs, standIn)
	go func() { _ = gs.Serve(grpcLn) }()
	t.Cleanup(gs.Stop)

	httpLn := listen(t)
	recv := &standInHTTP{}
	hs := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(httpLn) }()
	t.Cleanup(func() { _ = hs.Close() })

	// The pipeline helper (what a dev mode uses) with both shipped Sensors.
	started := time.Now()
	pipe, err := argoevents.StartPipeline(e.ctx, argoevents.PipelineOptions{
		EventBusURL: e.nats.ClientURL(), Kubeconfig: e.cp.Kubeconfig(), Namespace: e.ns,
		GRPCServer: grpcLn.Addr().String(), HTTPURL: "http://" + httpLn.Addr().String(), HTTPAuth: true, LogDir: e.logDir,
	})
	if err != nil {
		t.Fatalf("StartPipeline: %v", err)
	}
	t.Cleanup(func() {
		if err := pipe.Stop(); err != nil {
			t.Errorf("stop pipeline: %v", err)
		}
		if t.Failed() {
			for _, p := range pipe.Processes {
				t.Logf("---- %s log (%s) ----\n%s", p.Name(), p.LogFile(), p.Tail(150))
			}
		}
	})
	if len(pipe.Processes) != 3 {
		t.Fatalf("pipeline runs %d processes, want 3", len(pipe.Processes))
	}
	t.Logf("pipeline (EventSource and two Sensors) ready in %s", time.Since(started).Round(time.Millisecond))

	e.createRevision("app-config-1")
	created := time.Now()
	rs := e.createRolloutReplicaSet("app", "app-config-1")

	tests := []struct {
		name string
		// check returns nil once the receiver saw the ReplicaSet ADD.
		check func() error
	}{
		{name: "eventsource publishes to JetStream", check: func() error {
			return jetStreamHas(e, "default.configmap-attacher.rollout-replicasets", rs.Name)
		}},
		{name: "gRPC sensor reaches the custom trigger", check: func() error {
			specs, payloads, policies := standIn.snapshot()
			if len(payloads) == 0 || policies == 0 {
				return fmt.Errorf("FetchResource %d, Execute %d, ApplyPolicy %d calls", len(specs), len(payloads), policies)
			}
			var spec map[string]string
			if err := yaml.Unmarshal([]byte(specs[0]), &spec); err != nil || spec["operation"] != "attach" {
				return fmt.Errorf("spec %q (err %v): want operation attach", specs[0], err)
			}
			return checkPayload(payloads[0], rs)
		}},
		{name: "HTTP sensor posts to the receiver", check: func() error {
			bodies, ctypes, query, auth := recv.snapshot()
			if len(bodies) == 0 {
				return fmt.Errorf("no POST yet")
			}
			if ctypes[0] != "application/json" || query[0] != "operation=attach" {
				return fmt.Errorf("content type %q, query %q", ctypes[0], query[0])
			}
			// The shipped secureHeaders: the token from the Secret Argo Events mounts.
			if auth[0] != "Bearer "+argoevents.TestHTTPToken {
				return fmt.Errorf("Authorization %q, want the token from the Sensor's secureHeaders Secret", auth[0])
			}
			return checkPayload(bodies[0], rs)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			controlplane.Eventually(t, 30*time.Second, tc.name, tc.check)
			t.Logf("seen %s after the ReplicaSet was created", time.Since(created).Round(time.Millisecond))
		})
	}
}

// jetStreamHas reads the subject from the start of the EventBus stream and looks for a
// resource event whose body names the ReplicaSet.
func jetStreamHas(e *env, subject, rsName string) error {
	nc, err := e.nats.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, "default", jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return fmt.Errorf("consumer on stream default: %w", err)
	}
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return fmt.Errorf("no message for %s on %s: %w", rsName, subject, err)
		}
		var ce struct {
			Type       string          `json:"type"`
			Source     string          `json:"source"`
			Subject    string          `json:"subject"`
			Data       json.RawMessage `json:"data"`
			DataBase64 string          `json:"data_base64"`
		}
		if err := json.Unmarshal(msg.Data(), &ce); err != nil {
			return fmt.Errorf("message is not a CloudEvent: %w", err)
		}
		data := []byte(ce.Data)
		if ce.DataBase64 != "" {
			if data, err = base64.StdEncoding.DecodeString(ce.DataBase64); err != nil {
				return err
			}
		}
		var d resourceEventData
		if err := json.Unmarshal(data, &d); err != nil {
			return fmt.Errorf("CloudEvent data is not resource event data: %w", err)
		}
		var body struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if json.Unmarshal(d.Body, &body) == nil && body.Metadata.Name == rsName && d.Type == "ADD" {
			if ce.Source != "configmap-attacher" || ce.Subject != "rollout-replicasets" {
				return fmt.Errorf("CloudEvent source/subject %s/%s", ce.Source, ce.Subject)
			}
			return nil
		}
	}
}
