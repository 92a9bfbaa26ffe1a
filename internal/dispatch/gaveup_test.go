package dispatch_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// A given-up event is told with a Warning Event on its ReplicaSet only in the cluster it
// reached and a namespace the service may act in: an untrusted payload that never
// reached a cluster, or names a denied namespace, makes the service write nothing.
func TestGaveUpTellsOnlyWhereTheServiceMayAct(t *testing.T) {
	kc := fake.NewClientset()
	rec := record.NewFakeRecorder(10)
	att, err := core.NewAttacher(core.Config{Cluster: "home", Client: kc, Reader: core.LiveReader{Client: kc}, Recorder: rec,
		Namespaces: core.NamespacePolicy{Deny: []string{"kube-system"}}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	clusters, err := dispatch.NewSingleCluster("home", att)
	require.NoError(t, err)
	d, err := dispatch.New(dispatch.Config{Clusters: clusters, Logger: testfix.Quiet()})
	require.NoError(t, err)
	last := errors.New("still unavailable")
	for _, tc := range []struct {
		name string
		ev   core.Event
		path dispatch.Path
		want int
	}{
		{"reached no cluster", core.Event{Namespace: "shop", Name: "web-1"}, dispatch.PathEventBus, 0},
		{"a denied namespace", core.Event{Cluster: "home", Namespace: "kube-system", Name: "coredns-1"}, dispatch.PathEventBus, 0},
		{"a revision event", core.Event{Cluster: "home", Namespace: "shop", Name: "cfg-1"}, dispatch.PathRevision, 0},
		{"its ReplicaSet in its cluster", core.Event{Cluster: "home", Namespace: "shop", Name: "web-1"}, dispatch.PathWatcher, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.GaveUp(tc.path, tc.ev, "max-retries", last)
			assert.Len(t, rec.Events, tc.want)
			for range len(rec.Events) {
				assert.Contains(t, <-rec.Events, core.ReasonGivenUp)
			}
		})
	}
}
