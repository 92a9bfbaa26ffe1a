package clusters_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestEventBusMessageForAnArgoCDClusterIsKeptUntilTheSecretsAreListed: serve starts
// its EventBus subscription once the default cluster's caches are in sync; a message
// naming a cluster of an Argo CD Secret that exists but is not listed yet (the listing
// slow, the apiserver busy) must be retried, never terminated as an unknown cluster:
// once the Secrets are listed, the message's ReplicaSet is attached. (The revision side's
// start-up replay of the new cluster attaches it too and would hide the loss: the test
// asserts the message itself was not terminated.)
func TestEventBusMessageForAnArgoCDClusterIsKeptUntilTheSecretsAreListed(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	argocd, ns := namespace(t, a, "early-argocd"), namespace(t, b, "early")
	sec := clusterSecret(b, argocd, "member", "member")
	createSecret(t, a, sec)
	rs, owners := testfix.ListedFixture(t, b, ns, "web", "cfg-web")

	// The Argo CD Secrets are read through a proxy that answers nothing for now.
	slow := testfix.NewHangProxy(t, strings.TrimPrefix(a.ServerURL(), "https://"))
	slow.Hang()
	argoCfg := rest.CopyConfig(a.RESTConfig())
	argoCfg.Host = "https://" + slow.Addr()
	argoClient, err := kubernetes.NewForConfig(argoCfg)
	require.NoError(t, err)

	bus, err := natsserver.Start(ctx, natsserver.Options{Token: "s3cret"})
	require.NoError(t, err)
	t.Cleanup(bus.Stop)
	nc, err := bus.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}})
	require.NoError(t, err)

	ro := cluster.Options{Clusters: []cluster.Spec{{Name: "hub", Source: cluster.SourceHome, Origin: "test", Config: a.RESTConfig()}},
		ArgoCDNamespace: argocd, ArgoCDClient: argoClient, Logger: breakLogger(t), ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second}
	eb := eventbus.SubscriberOptions{URL: bus.ClientURL(), Auth: eventbus.Auth{Token: "s3cret"}, TLS: eventbus.TLS{CAFile: bus.CAFile()},
		EventSourceName: "replicasets", NakDelay: 100 * time.Millisecond}
	srv, err := server.New(nil, server.Options{Clusters: &ro, Ingress: server.Ingress{EventBus: &eb}, GRPCAddr: "-", HTTPAddr: "127.0.0.1:0",
		Logger: ro.Logger, ShutdownTimeout: 5 * time.Second, HTTPToken: []byte(breakToken)})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(rctx) }()
	s := &breakServe{srv: srv, addr: srv.HTTPAddr(), cancel: cancel, done: done}
	t.Cleanup(func() { slow.Recover(); s.stop(t) })

	controlplane.Eventually(t, 30*time.Second, "subscribed to the EventBus", func() error {
		if _, body := s.get("/readyz"); !strings.Contains(body, "EventBus: subscribed") {
			return fmt.Errorf("/readyz: %s", body)
		}
		return nil
	})
	p := &eventsource.Publisher{JS: js, EventSourceName: "replicasets", EventName: "replicaset-add", Metadata: map[string]string{"cluster": "member"}}
	require.NoError(t, p.Publish(ctx, "ADD", rs))
	controlplane.Eventually(t, 30*time.Second, "the message handled once while the Secrets are not listed", func() error {
		if l := s.metricLine("configmap_attacher_eventbus_messages_total{"); l == "" {
			return fmt.Errorf("no EventBus message answered yet")
		}
		return nil
	})
	require.Empty(t, s.metricLine(`configmap_attacher_eventbus_messages_total{result="term"}`),
		"a message for a cluster whose Secret is not listed yet is retried, not terminated as unknown")
	slow.Recover()
	controlplane.Eventually(t, 60*time.Second, "the ReplicaSet attached once the Secrets are listed", func() error {
		if o := owners(t); !slices.Equal(o, []string{string(rs.UID)}) {
			st, _ := statusOf(s, argocd+"/member")
			return fmt.Errorf("owners %v; member %+v; %s", o, st, s.metricLine("configmap_attacher_eventbus_messages_total{"))
		}
		return nil
	})
}
