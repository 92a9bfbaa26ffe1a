package eventsource_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

var sharedCP *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &sharedCP)) }

// The eventsource command's Source publishes existing and new ReplicaSets as ADD events in
// Argo Events' resource event format, which the shared decoder reads back.
func TestSourcePublishesArgoResourceEvents(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	ctx := context.Background()
	const ns = "source"
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	existing := testfix.CreateReplicaSet(t, kc, ns, "before", "cfg")

	srv, err := natsserver.Start(ctx, natsserver.Options{})
	require.NoError(t, err)
	defer srv.Stop()
	nc, err := srv.Connect()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}})
	require.NoError(t, err)

	src, err := eventsource.NewSource(kc, &eventsource.Publisher{JS: js}, eventsource.SourceOptions{
		EventSourceName: "replicasets", EventName: "replicaset-add", Namespace: ns, Metadata: map[string]string{"cluster": "east"}})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	created := testfix.CreateReplicaSet(t, kc, ns, "after", "cfg")

	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{FilterSubject: "default.replicasets.replicaset-add", AckPolicy: jetstream.AckNonePolicy})
	require.NoError(t, err)
	seen := map[string]event.Decoded{}
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		batch, err := cons.Fetch(2, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		for msg := range batch.Messages() {
			var ce map[string]any
			require.NoError(t, json.Unmarshal(msg.Data(), &ce))
			assert.Equal(t, "resource", ce["type"])
			assert.Equal(t, "replicasets", ce["source"])
			assert.Equal(t, "replicaset-add", ce["subject"])
			assert.NotEmpty(t, msg.Headers().Get(jetstream.MsgIDHeader), "de-duplication key, as Argo Events sets it")
			d, err := event.Decode(msg.Data())
			require.NoError(t, err)
			seen[d.Event.Name] = d
		}
	}
	require.Len(t, seen, 2)
	assert.Equal(t, existing.UID, seen["before"].Event.UID, "existing ReplicaSets are published at start")
	assert.Equal(t, created.UID, seen["after"].Event.UID)
	assert.Equal(t, "ADD", seen["after"].Type)
	assert.Equal(t, "east", seen["after"].Cluster(""), "metadata.cluster travels with the event")
}
