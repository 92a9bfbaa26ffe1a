package eventbus

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// hangingAckMsg is a JetStream message whose ack confirmation never comes (the
// connection dropped mid-ack): DoubleAck blocks until its context ends.
type hangingAckMsg struct {
	jetstream.Msg
	data  []byte
	acked chan error
}

func (m *hangingAckMsg) Data() []byte    { return m.data }
func (m *hangingAckMsg) Subject() string { return "default.replicasets.replicaset-add" }
func (m *hangingAckMsg) InProgress() error {
	return nil
}
func (m *hangingAckMsg) DoubleAck(ctx context.Context) error {
	<-ctx.Done()
	m.acked <- ctx.Err()
	return ctx.Err()
}

type oneCluster struct{ a *core.Attacher }

func (c oneCluster) Attacher(string) (*core.Attacher, error) { return c.a, nil }

// liveReader reads ReplicaSets from a (fake) clientset; nothing else exists.
type liveReader struct{ kc kubernetes.Interface }

func (r liveReader) ReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	return r.kc.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
}
func (r liveReader) Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return r.kc.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}
func (r liveReader) Rollout(context.Context, string, string) (*unstructured.Unstructured, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}, "")
}
func (r liveReader) ObjectMeta(_ context.Context, _ core.Kind, _, name string) (*metav1.PartialObjectMetadata, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}
func (r liveReader) Users(context.Context, core.Kind, string, string) (*core.Users, error) {
	return &core.Users{}, nil
}

// TestUnconfirmedAckDoesNotHoldTheSlot: when an ack's confirmation never arrives, the
// message's handling ends after AckConfirmTimeout, not after the execute timeout, so its
// in-flight slot is free again (with --eventbus-max-in-flight 1 the whole subscription
// stalled for the whole timeout after a NATS restart). The message is then redelivered later
// and handled idempotently.
func TestUnconfirmedAckDoesNotHoldTheSlot(t *testing.T) {
	kc := fake.NewClientset(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "u1"}})
	quiet := testfix.Quiet()
	a, err := core.NewAttacher(core.Config{Client: kc, Reader: liveReader{kc: kc}, Logger: quiet})
	require.NoError(t, err)
	d, err := dispatch.New(dispatch.Config{Clusters: oneCluster{a: a}, Logger: quiet, ExecuteTimeout: time.Hour})
	require.NoError(t, err)
	s, err := NewSubscriber(SubscriberOptions{URL: "nats://127.0.0.1:1", Logger: quiet, Registerer: prometheus.NewRegistry()}, d)
	require.NoError(t, err)
	msg := &hangingAckMsg{acked: make(chan error, 1),
		data: []byte(`{"type":"ADD","body":{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop","uid":"u1"}}}`)}
	done := make(chan struct{})
	go func() {
		s.handle(context.Background(), msg)
		close(done)
	}()
	select {
	case <-done:
		require.ErrorIs(t, <-msg.acked, context.DeadlineExceeded, "the ack wait ended by its own bound")
	case <-time.After(10 * AckConfirmTimeout):
		t.Fatal("handle still waiting for the ack confirmation (it would hold the in-flight slot until the timeout)")
	}
}
