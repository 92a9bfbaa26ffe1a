package eventbus_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

var sharedCP *controlplane.ControlPlane

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // the subscriber child process needs no control plane of its own
		os.Exit(m.Run())
	}
	os.Exit(controlplane.TestMain(m, &sharedCP))
}

var quiet = testfix.Quiet()

// countingClusters routes every event to one Attacher and counts (and can hold) calls.
type countingClusters struct {
	a     *core.Attacher
	calls atomic.Int64
	hold  chan struct{} // when non-nil, calls after holdAfter block until it is closed
	after int64
}

func (c *countingClusters) Attacher(name string) (*core.Attacher, error) {
	n := c.calls.Add(1)
	if c.hold != nil && n > c.after {
		<-c.hold
	}
	return c.a, nil
}

type fixture struct {
	t    *testing.T
	ns   string
	kc   kubernetes.Interface
	nats *natsserver.Server
	js   jetstream.JetStream
	pub  *eventsource.Publisher
	att  *core.Attacher
}

func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	f := &fixture{t: t, ns: name, kc: cp.Client()}
	_, err := f.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	f.nats, err = natsserver.Start(ctx, natsserver.Options{Token: "s3cret"})
	require.NoError(t, err)
	t.Cleanup(f.nats.Stop)
	nc, err := f.nats.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	f.js, err = jetstream.New(nc)
	require.NoError(t, err)
	// What the Argo Events EventBus controller creates.
	_, err = f.js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}, Duplicates: 5 * time.Minute})
	require.NoError(t, err)
	f.pub = &eventsource.Publisher{JS: f.js, EventSourceName: "replicasets", EventName: "replicaset-add"}
	clients, err := kube.NewClients(cp.RESTConfig())
	require.NoError(t, err)
	f.att, err = core.NewAttacher(core.Config{Client: clients.Kube, Logger: quiet,
		Reader: core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata}})
	require.NoError(t, err)
	return f
}

func (f *fixture) subscriber(clusters dispatch.Clusters, reg prometheus.Registerer, mutate ...func(*eventbus.SubscriberOptions)) *eventbus.Subscriber {
	return f.subscriberTo(over(f.t, clusters), reg, mutate...)
}

// subscriberTo is subscriber feeding d.
func (f *fixture) subscriberTo(d eventbus.Dispatcher, reg prometheus.Registerer, mutate ...func(*eventbus.SubscriberOptions)) *eventbus.Subscriber {
	f.t.Helper()
	o := eventbus.SubscriberOptions{URL: f.nats.ClientURL(), Auth: eventbus.Auth{Token: "s3cret"}, TLS: eventbus.TLS{CAFile: f.nats.CAFile()},
		EventSourceName: "replicasets", Logger: quiet, Registerer: reg, NakDelay: 200 * time.Millisecond}
	for _, m := range mutate {
		m(&o)
	}
	s, err := eventbus.NewSubscriber(o, d)
	require.NoError(f.t, err)
	return s
}

func (f *fixture) start(s *eventbus.Subscriber) (stop func() error) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		f.t.Fatalf("subscriber stopped: %v", err)
	case <-time.After(20 * time.Second):
		f.t.Fatal("subscriber not ready")
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	f.t.Cleanup(func() { _ = stop() })
	return stop
}

// workload creates n ReplicaSets, each using one of the opted-in ConfigMaps cm-0..cm-(m-1).
func (f *fixture) workload(n, m int) []*appsv1.ReplicaSet {
	f.t.Helper()
	ctx := context.Background()
	for i := 0; i < m; i++ {
		_, err := f.kc.CoreV1().ConfigMaps(f.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
		require.NoError(f.t, err)
	}
	var out []*appsv1.ReplicaSet
	zero := int32(0)
	for i := 0; i < n; i++ {
		labels := map[string]string{"app": fmt.Sprintf("a%d", i)}
		rs, err := f.kc.AppsV1().ReplicaSets(f.ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rs-%d", i)},
			Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("cm-%d", i%m)}}}}}}}}},
		}, metav1.CreateOptions{})
		require.NoError(f.t, err)
		out = append(out, rs)
	}
	return out
}

// allAttached fails unless every ReplicaSet owns its ConfigMap.
func (f *fixture) allAttached(sets []*appsv1.ReplicaSet, m int) error {
	owners := map[string]bool{}
	for i := 0; i < m; i++ {
		cm, err := f.kc.CoreV1().ConfigMaps(f.ns).Get(context.Background(), fmt.Sprintf("cm-%d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, o := range cm.OwnerReferences {
			owners[string(o.UID)] = true
		}
	}
	missing := 0
	for _, rs := range sets {
		if !owners[string(rs.UID)] {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d ReplicaSets not attached yet", missing, len(sets))
	}
	return nil
}

func (f *fixture) consumerIdle() error {
	c, err := f.js.Consumer(context.Background(), "default", eventbus.DefaultDurable)
	if err != nil {
		return err
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return err
	}
	if info.NumPending != 0 || info.NumAckPending != 0 {
		return fmt.Errorf("consumer has %d pending and %d unacked", info.NumPending, info.NumAckPending)
	}
	return nil
}

func TestSubscriberAcksAfterAttachAndTerminatesBadInput(t *testing.T) {
	f := newFixture(t, "eventbus-ack")
	reg := prometheus.NewRegistry()
	s := f.subscriber(&countingClusters{a: f.att}, reg)
	f.start(s)
	sets := f.workload(1, 1)
	ctx := context.Background()

	require.NoError(t, f.pub.Publish(ctx, "ADD", sets[0]))
	controlplane.Eventually(t, 20*time.Second, "the ConfigMap to be attached", func() error { return f.allAttached(sets, 1) })
	controlplane.Eventually(t, 10*time.Second, "the message to be acked", f.consumerIdle)

	messages := func(result string) float64 {
		mf, err := reg.Gather()
		require.NoError(t, err)
		for _, fam := range mf {
			if fam.GetName() == "configmap_attacher_eventbus_messages_total" {
				for _, m := range fam.Metric {
					if m.GetLabel()[0].GetValue() == result {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	assert.Equal(t, 1.0, messages("ack"))

	bad := []struct {
		name string
		data string
	}{
		{"not JSON", "{{{"},
		{"ReplicaSet without a name", `{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","body":{"kind":"ReplicaSet","metadata":{"namespace":"x"}}}`},
		{"forged UID", fmt.Sprintf(`{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","body":{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"namespace":%q,"name":%q,"uid":"00000000-0000-4000-8000-000000000000"}}}`, f.ns, sets[0].Name)},
		{"ReplicaSet gone", fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"namespace":%q,"name":"gone"}}`, f.ns)},
	}
	for _, b := range bad {
		_, err := f.js.Publish(ctx, f.pub.Subject(), []byte(b.data))
		require.NoError(t, err, b.name)
	}
	_, err := f.js.Publish(ctx, f.pub.Subject(), []byte(`{"type":"UPDATE","group":"apps","version":"v1","resource":"replicasets","body":{"kind":"ReplicaSet","metadata":{"namespace":"x","name":"y"}}}`))
	require.NoError(t, err)
	controlplane.Eventually(t, 10*time.Second, "bad messages to be terminated", func() error {
		if got := messages("term"); got != float64(len(bad)) {
			return fmt.Errorf("%v terminated", got)
		}
		return f.consumerIdle()
	})
	assert.Equal(t, 1.0, messages("ignored"), "an UPDATE is acked and ignored")
	cm, err := f.kc.CoreV1().ConfigMaps(f.ns).Get(ctx, "cm-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Len(t, cm.OwnerReferences, 1, "bad input changed nothing")
}

// childEnv makes the test binary run TestSubscriberChildProcess as a real subscriber
// process, so that the crash test can SIGKILL it.
const childEnv = "CMA_SUBSCRIBER_CHILD"

// TestSubscriberChildProcess is the subscriber process of TestSubscriberKilledLosesNothing.
func TestSubscriberChildProcess(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as the child process of TestSubscriberKilledLosesNothing")
	}
	cfg, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: os.Getenv("KUBECONFIG")})
	require.NoError(t, err)
	clients, err := kube.NewClients(cfg)
	require.NoError(t, err)
	att, err := core.NewAttacher(core.Config{Client: clients.Kube, Logger: quiet,
		Reader: core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata}})
	require.NoError(t, err)
	s, err := eventbus.NewSubscriber(eventbus.SubscriberOptions{URL: os.Getenv("NATS_URL"), Auth: eventbus.Auth{Token: "s3cret"},
		TLS: eventbus.TLS{CAFile: os.Getenv("NATS_CA")}, EventSourceName: "replicasets", Logger: quiet,
		Registerer: prometheus.NewRegistry(), AckWait: 2 * time.Second, MaxInFlight: 4}, over(t, &slowClusters{a: att}))
	require.NoError(t, err)
	require.NoError(t, s.Run(context.Background())) // runs until killed
}

// slowClusters makes every message take 100 ms, so a kill lands mid-stream.
type slowClusters struct{ a *core.Attacher }

func (c *slowClusters) Attacher(string) (*core.Attacher, error) {
	time.Sleep(100 * time.Millisecond)
	return c.a, nil
}

// A subscriber process killed (SIGKILL) with messages in flight loses nothing: its
// replacement on the same durable consumer gets the unacked ones redelivered.
func TestSubscriberKilledLosesNothing(t *testing.T) {
	f := newFixture(t, "eventbus-kill")
	const n, m = 60, 6
	sets := f.workload(n, m)
	child := exec.Command(os.Args[0], "-test.run=^TestSubscriberChildProcess$", "-test.v")
	child.Env = append(os.Environ(), childEnv+"=1", "KUBECONFIG="+sharedCP.Kubeconfig(),
		"NATS_URL="+f.nats.ClientURL(), "NATS_CA="+f.nats.CAFile())
	var childOut bytes.Buffer
	child.Stdout, child.Stderr = &childOut, &childOut
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	ctx := context.Background()
	controlplane.Eventually(t, 20*time.Second, "the child to create the durable consumer", func() error {
		_, err := f.js.Consumer(ctx, "default", eventbus.DefaultDurable)
		return err
	})
	for _, rs := range sets {
		require.NoError(t, f.pub.Publish(ctx, "ADD", rs))
	}
	controlplane.Eventually(t, 30*time.Second, "the child to be mid-stream", func() error {
		err := f.allAttached(sets, m)
		if err == nil {
			return fmt.Errorf("the child finished everything before the kill")
		}
		var missing int
		_, _ = fmt.Sscanf(err.Error(), "%d of", &missing)
		if missing > n-10 {
			return fmt.Errorf("only %d attached", n-missing)
		}
		return nil
	})
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	t.Logf("killed the subscriber mid-stream: %v", f.allAttached(sets, m))

	// The replacement runs with the child's flags (the durable's limits follow the flags:
	// another AckWait would re-time the redelivery of what the child held).
	f.start(f.subscriber(&countingClusters{a: f.att}, prometheus.NewRegistry(), func(o *eventbus.SubscriberOptions) {
		o.AckWait, o.MaxInFlight = 2*time.Second, 4
	}))
	controlplane.Eventually(t, 60*time.Second, "every ReplicaSet to be attached", func() error { return f.allAttached(sets, m) })
	controlplane.Eventually(t, 20*time.Second, "the stream to be fully acked", f.consumerIdle)
}

// Two replicas on one durable consumer split the work.
func TestSubscribersSplitWork(t *testing.T) {
	f := newFixture(t, "eventbus-split")
	const n, m = 80, 8
	sets := f.workload(n, m)
	a, b := &countingClusters{a: f.att}, &countingClusters{a: f.att}
	f.start(f.subscriber(a, prometheus.NewRegistry()))
	f.start(f.subscriber(b, prometheus.NewRegistry()))
	ctx := context.Background()
	for _, rs := range sets {
		require.NoError(t, f.pub.Publish(ctx, "ADD", rs))
	}
	controlplane.Eventually(t, 60*time.Second, "every ReplicaSet to be attached", func() error { return f.allAttached(sets, m) })
	controlplane.Eventually(t, 20*time.Second, "the stream to be fully acked", f.consumerIdle)
	t.Logf("replica a handled %d, replica b %d", a.calls.Load(), b.calls.Load())
	assert.Positive(t, a.calls.Load())
	assert.Positive(t, b.calls.Load())
	assert.GreaterOrEqual(t, a.calls.Load()+b.calls.Load(), int64(n))
}

// TestSubscriberRecreatesAStalledPull: while the durable consumer is paused (the server
// delivers nothing although messages are pending: what a pull lost across a server
// restart looks like), the watchdog re-creates the pull; once deliveries resume every
// ReplicaSet is attached through the new pull and the consumer ends idle.
func TestSubscriberRecreatesAStalledPull(t *testing.T) {
	f := newFixture(t, "eventbus-stall")
	logs := &testfix.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := f.subscriber(&countingClusters{a: f.att}, prometheus.NewRegistry(), func(o *eventbus.SubscriberOptions) {
		o.StallTimeout, o.Logger, o.DeliverAll = 800*time.Millisecond, log, true
	})
	f.start(s)
	ctx := context.Background()
	_, err := f.js.PauseConsumer(ctx, "default", eventbus.DefaultDurable, time.Now().Add(3*time.Second))
	require.NoError(t, err)
	sets := f.workload(10, 10)
	for _, rs := range sets {
		require.NoError(t, f.pub.Publish(ctx, "ADD", rs))
	}
	controlplane.Eventually(t, 60*time.Second, "every ReplicaSet attached after the pause", func() error { return f.allAttached(sets, 10) })
	controlplane.Eventually(t, 30*time.Second, "the consumer idle", f.consumerIdle)
	assert.Contains(t, logs.String(), "EventBus pull stalled: re-creating it")
}
