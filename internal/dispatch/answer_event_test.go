package dispatch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// downAttacher is an Attacher of cluster name whose every read fails transiently.
func downAttacher(t *testing.T, name string) *core.Attacher {
	kc := fake.NewClientset()
	kc.PrependReactor("get", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("test: the apiserver is restarting")
	})
	a, err := core.NewAttacher(core.Config{Cluster: name, Client: kc, Reader: core.LiveReader{Client: kc}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	return a
}

// Every answer names the event as GaveUp takes it, so that a way in that stops retrying
// gives up the event in the cluster it reached, without rebuilding it from the response:
// a local answer, an event that reached no cluster, and an answer of the owning replica.
func TestAnAnswerNamesTheEventAWayInGivesUp(t *testing.T) {
	d, err := dispatch.New(dispatch.Config{Clusters: clusterMap{"home": downAttacher(t, "home")}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx := context.Background()
	sent := core.Event{Namespace: "shop", Name: "web-1", UID: "u1"}
	for _, tc := range []struct {
		name  string
		a     func() dispatch.Answer
		class dispatch.Class
		want  core.Event
	}{
		{"its cluster failed transiently", func() dispatch.Answer {
			ev := sent
			ev.Cluster = "home"
			return d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathEventBus, Options: core.DefaultOptions(), Event: ev})
		}, dispatch.ClassUnavailable, core.Event{Cluster: "home", Namespace: "shop", Name: "web-1"}}, // no UID: never read
		{"it reached no cluster", func() dispatch.Answer {
			ev := sent
			ev.Cluster = "gone"
			return d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathEventBus, Options: core.DefaultOptions(), Event: ev})
		}, dispatch.ClassInvalid, core.Event{Namespace: "shop", Name: "web-1"}},
		{"the owning replica answered", func() dispatch.Answer {
			return dispatch.AnswerOf(dispatch.ClassUnavailable, "", "", dispatch.Response{Result: core.Result{Cluster: "prod",
				Namespace: "shop", ReplicaSet: "web-1", UID: "u1"}})
		}, dispatch.ClassUnavailable, core.Event{Cluster: "prod", Namespace: "shop", Name: "web-1", UID: "u1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a()
			require.Equal(t, tc.class, a.Class, "%v", a.Err)
			assert.Equal(t, tc.want, a.Event)
		})
	}
}
