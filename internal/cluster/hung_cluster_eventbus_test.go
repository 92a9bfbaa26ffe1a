package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestHungClusterEventBusMessagesLeaveHandlersForTheOthers (rule 13): a cluster whose
// credential plugin hangs, not yet probed down, has a backlog of EventBus messages; the
// subscriber's handlers (4 here) are shared by every cluster. A healthy cluster's
// message is still handled promptly: the hung cluster's messages beyond its share are
// answered busy (Nak) instead of waiting for its slots with a handler each.
func TestHungClusterEventBusMessagesLeaveHandlersForTheOthers(t *testing.T) {
	requireClusters(t)
	ctx := context.Background()
	const argocd = "hung-eventbus-argocd"
	_, err := cpA.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argocd}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "hang")
	require.NoError(t, os.WriteFile(plugin, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755))
	allowed, err := NewExecPolicy([]string{plugin}, 10*time.Minute, "")
	require.NoError(t, err)
	home := Spec{Name: "hub", Source: SourceHome, Origin: "test", Config: cpA.RESTConfig()}
	// Probes that never mark the hung cluster down during the test: the window before
	// the probe notices is what is measured.
	reg, err := New(Options{Clusters: []Spec{home}, ArgoCDNamespace: argocd, ExecPlugins: allowed, Logger: testLogger(t),
		ProbeInterval: time.Minute, ProbeTimeout: time.Minute})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = reg.Run(rctx) }()

	secrets := cpA.Client().CoreV1().Secrets(argocd)
	good := argoCDSecret("good", "good", cpB)
	good.Namespace = argocd
	cfg, _ := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{"insecure": true},
		"execProviderConfig": map[string]any{"command": plugin, "apiVersion": "client.authentication.k8s.io/v1beta1"}})
	hung := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hung", Namespace: argocd,
		Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
		StringData: map[string]string{"name": "hung", "server": "https://" + testfix.NewCutProxy(t, strings.TrimPrefix(cpB.ServerURL(), "https://")).Addr(), "config": string(cfg)}}
	for _, s := range []*corev1.Secret{good, hung} {
		_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
		defer func() { _ = secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}) }()
	}
	controlplane.Eventually(t, 30*time.Second, "good healthy", func() error {
		if !reg.Healthy("good") {
			_, r := reg.Readiness()
			return fmt.Errorf("%s", r)
		}
		return nil
	})

	nsrv, err := natsserver.Start(ctx, natsserver.Options{Token: "s3cret"})
	require.NoError(t, err)
	defer nsrv.Stop()
	nc, err := nsrv.Connect()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}})
	require.NoError(t, err)
	// As serve builds it: every cluster may hold half the slots.
	d, err := dispatch.New(dispatch.Config{Clusters: reg, Logger: testLogger(t), MaxInFlight: 4, MaxInFlightPerCluster: 2})
	require.NoError(t, err)
	go func() { _ = d.Run(rctx) }()
	sub, err := eventbus.NewSubscriber(eventbus.SubscriberOptions{URL: nsrv.ClientURL(), Auth: eventbus.Auth{Token: "s3cret"},
		TLS: eventbus.TLS{CAFile: nsrv.CAFile()}, EventSourceName: "replicasets", Logger: testLogger(t),
		Registerer: prometheus.NewRegistry(), NakDelay: 100 * time.Millisecond, MaxInFlight: 4}, d)
	require.NoError(t, err)
	go func() { _ = sub.Run(rctx) }()
	select {
	case <-sub.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("subscriber not ready")
	}
	publish := func(cluster string, rs *appsv1.ReplicaSet) {
		p := &eventsource.Publisher{JS: js, EventSourceName: "replicasets", EventName: "replicaset-add",
			Metadata: map[string]string{"cluster": cluster}}
		require.NoError(t, p.Publish(ctx, "ADD", rs))
	}
	f := makeFixture(t, cpB, "hung-eventbus", "web", "cfg-web")
	// A backlog for the hung cluster, before the healthy cluster's event: more than the
	// handlers (a backlog larger than the consumer's window is the EventBus package's
	// TestAHungClustersBacklogLeavesTheEventBusToTheOthers, docs/design.md "EventBus isolation").
	for i := range 8 {
		rs := f.rs.DeepCopy()
		rs.Name = fmt.Sprintf("hung-%d", i)
		rs.UID = ""
		publish("hung", rs)
	}
	start := time.Now()
	publish("good", f.rs)
	controlplane.Eventually(t, 30*time.Second, "good's revision attached from the EventBus", func() error {
		if got := f.owners(t); len(got) != 1 || got[0] != string(f.rs.UID) {
			return fmt.Errorf("owners %v", got)
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("good's EventBus event attached %s after publishing, behind 8 messages of a hung cluster", took.Round(time.Millisecond))
	require.Less(t, took, 15*time.Second, "the hung cluster's messages held every handler until their deadline")
}
