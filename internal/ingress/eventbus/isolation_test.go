package eventbus_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

var isolationRuns atomic.Int32

// namedClusters routes each event to the Attacher of its cluster.
type namedClusters map[string]*core.Attacher

func (m namedClusters) Attacher(name string) (*core.Attacher, error) {
	if a, ok := m[name]; ok {
		return a, nil
	}
	return nil, core.Invalidf("cluster", "unknown cluster %q", name)
}

// attacherVia is an Attacher of cluster name talking to the control plane at host.
func attacherVia(t *testing.T, name, host string) *core.Attacher {
	t.Helper()
	cfg := rest.CopyConfig(sharedCP.RESTConfig())
	cfg.Host = host
	clients, err := kube.NewClients(cfg)
	require.NoError(t, err)
	a, err := core.NewAttacher(core.Config{Cluster: name, Client: clients.Kube, Logger: quiet,
		Reader: core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata}})
	require.NoError(t, err)
	return a
}

// counter is the value of the EventBus messages counter for result.
func counter(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mf, err := reg.Gather()
	require.NoError(t, err)
	for _, fam := range mf {
		if fam.GetName() != "configmap_attacher_eventbus_messages_total" {
			continue
		}
		for _, m := range fam.Metric {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestAHungClustersBacklogLeavesTheEventBusToTheOthers (rule 13, docs/design.md
// "EventBus isolation"): a cluster whose apiserver takes connections and never answers
// has a backlog of 60 EventBus messages, queued before one message of a healthy cluster;
// 60 is far more than the subscriber's 4 handlers and than 4 x MaxInFlight, the window
// the consumer had before. The healthy cluster's event is attached while the hung cluster
// still hangs (its messages wait out their Nak delays in the consumer's window, which
// leaves room for the others); once the hung cluster answers again, every one of its
// messages is handled, none given up. The latency goes to the log, not an assertion.
func TestAHungClustersBacklogLeavesTheEventBusToTheOthers(t *testing.T) {
	const hungN = 60
	f := newFixture(t, fmt.Sprintf("eventbus-isolation-%d", isolationRuns.Add(1))) // -count=N: a namespace each
	sets := f.workload(hungN+1, hungN+1)
	hungSets, healthySet := sets[:hungN], sets[hungN:]
	u, err := url.Parse(sharedCP.RESTConfig().Host)
	require.NoError(t, err)
	proxy := testfix.NewHangProxy(t, u.Host)
	clusters := namedClusters{"healthy": attacherVia(t, "healthy", u.String()), "hung": attacherVia(t, "hung", "https://"+proxy.Addr())}
	// As serve builds it for several clusters: each may hold half the slots.
	d, err := dispatch.New(dispatch.Config{Clusters: clusters, Logger: quiet, MaxInFlight: 4, MaxInFlightPerCluster: 2,
		ExecuteTimeout: 2 * time.Second})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	f.start(f.subscriberTo(d, reg, func(o *eventbus.SubscriberOptions) {
		// MaxDeliver high: the hang, however long this machine needs, gives nothing up.
		o.MaxInFlight, o.NakDelay, o.MaxNakDelay, o.MaxDeliver = 4, 100*time.Millisecond, time.Second, 1000
	}))
	ctx := context.Background()
	publish := func(cluster string, rs *appsv1.ReplicaSet) {
		p := &eventsource.Publisher{JS: f.js, EventSourceName: "replicasets", EventName: "replicaset-add",
			Metadata: map[string]string{"cluster": cluster}}
		require.NoError(t, p.Publish(ctx, "ADD", rs))
	}

	proxy.Hang()
	for _, rs := range hungSets {
		publish("hung", rs)
	}
	controlplane.Eventually(t, 60*time.Second, "the hung cluster's backlog answered retry-later", func() error {
		if got := counter(t, reg, "nak"); got < hungN {
			return fmt.Errorf("%v Naks", got)
		}
		return nil
	})
	start := time.Now()
	publish("healthy", healthySet[0])
	controlplane.Eventually(t, 60*time.Second, "the healthy cluster's event attached while the other hangs",
		func() error { return f.allAttached(healthySet, hungN+1) })
	took := time.Since(start)
	require.EqualError(t, f.allAttached(hungSets, hungN+1), fmt.Sprintf("%d of %d ReplicaSets not attached yet", hungN, hungN),
		"the hung cluster still hangs")
	info, err := f.js.Consumer(ctx, "default", eventbus.DefaultDurable)
	require.NoError(t, err)
	t.Logf("the healthy cluster's event attached %s after it was published, behind %d messages of a hung cluster; consumer window %d (%d unacked)",
		took.Round(time.Millisecond), hungN, info.CachedInfo().Config.MaxAckPending, info.CachedInfo().NumAckPending)

	proxy.Recover()
	controlplane.Eventually(t, 120*time.Second, "every message of the recovered cluster handled",
		func() error { return f.allAttached(hungSets, hungN+1) })
	controlplane.Eventually(t, 30*time.Second, "the consumer idle", f.consumerIdle)
	assert.Zero(t, counter(t, reg, "term"), "nothing terminated or given up")
	assert.GreaterOrEqual(t, counter(t, reg, "ack"), float64(hungN+1), "every message acked")
}
