package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// awaitingReader is a cachedReader that is also a core.ReplicaSetAwaiter: its watch
// delivers arrives during the wait (nil: nothing arrives before the bound). asked
// records the UIDs waited for.
type awaitingReader struct {
	cachedReader
	arrives *appsv1.ReplicaSet
	asked   *[]types.UID
}

func (r awaitingReader) AwaitReplicaSet(_ context.Context, _, name string, uid types.UID) (*appsv1.ReplicaSet, bool) {
	*r.asked = append(*r.asked, uid)
	if r.arrives == nil || r.arrives.Name != name || (uid != "" && r.arrives.UID != uid) {
		return nil, false
	}
	return r.arrives.DeepCopy(), true
}

// Issue 19: an event that outruns the cache (not cached yet, or an older namesake cached)
// waits for the cache's own watch to deliver the ReplicaSet and then plans as on a cache
// hit: one GET in all, the live confirm right before the write. When nothing arrives in
// time it is read live and confirmed again (two GETs); a name that never existed is
// refused after the wait, on its one live read.
func TestEventOutrunningTheCacheCostsOneGetWhenTheCacheDelivers(t *testing.T) {
	const ns = "shop"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: "rs-2"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", "cfg")}}
	older := rs.DeepCopy()
	older.UID = "rs-1"
	cm := metav1.ObjectMeta{Namespace: ns, Name: "cfg", UID: "cm", ResourceVersion: "1", Labels: map[string]string{core.LabelRevision: "true"}}
	cases := []struct {
		name    string
		cached  *appsv1.ReplicaSet
		arrives *appsv1.ReplicaSet
		live    *appsv1.ReplicaSet // nil: gone
		gets    int
		patches int
		refused bool
	}{
		{"not cached, delivered during the wait", nil, rs, rs, 1, 1, false},
		{"not cached, not delivered in time", nil, nil, rs, 2, 1, false},
		{"older namesake cached, the new one delivered during the wait", older, rs, rs, 1, 1, false},
		{"older namesake cached, the new one not delivered in time", older, older, rs, 2, 1, false},
		{"delivered during the wait, deleted before the write", nil, rs, nil, 1, 0, true},
		{"never existed: refused after the wait", nil, nil, nil, 1, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{&corev1.ConfigMap{ObjectMeta: cm}}
			if tc.live != nil {
				objs = append(objs, tc.live)
			}
			kc := fake.NewClientset(objs...)
			var asked []types.UID
			r := awaitingReader{cachedReader: cachedReader{mapReader: mapReader{meta: map[string]*metav1.PartialObjectMetadata{"ConfigMap/cfg": {ObjectMeta: cm}}},
				cached: tc.cached}, arrives: tc.arrives, asked: &asked}
			a, err := core.NewAttacher(core.Config{Client: kc, Reader: r, Logger: testfix.Quiet()})
			require.NoError(t, err)
			_, err = a.Attach(context.Background(), core.Event{Namespace: ns, Name: rs.Name, UID: rs.UID, Options: core.DefaultOptions()})
			assert.Equal(t, tc.refused, errors.Is(err, core.ErrRefused), "err: %v", err)
			if !tc.refused {
				require.NoError(t, err)
			}
			verbs := map[string]int{}
			for _, act := range kc.Actions() {
				verbs[act.GetVerb()+" "+act.GetResource().Resource]++
			}
			assert.Equal(t, tc.gets, verbs["get replicasets"], "live reads of the ReplicaSet: %v", verbs)
			assert.Equal(t, tc.patches, verbs["patch configmaps"], "writes: %v", verbs)
			assert.Equal(t, []types.UID{rs.UID}, asked, "waited once, for the event's UID")
		})
	}
}

// A cache hit never waits.
func TestCachedReplicaSetIsNotWaitedFor(t *testing.T) {
	const ns = "shop"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: "rs-2"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", "cfg")}}
	cm := metav1.ObjectMeta{Namespace: ns, Name: "cfg", UID: "cm", ResourceVersion: "1", Labels: map[string]string{core.LabelRevision: "true"}}
	for _, uid := range []types.UID{"", rs.UID} {
		t.Run("event UID "+string(uid), func(t *testing.T) {
			kc := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: cm}, rs)
			var asked []types.UID
			r := awaitingReader{cachedReader: cachedReader{mapReader: mapReader{meta: map[string]*metav1.PartialObjectMetadata{"ConfigMap/cfg": {ObjectMeta: cm}}},
				cached: rs}, arrives: rs, asked: &asked}
			a, err := core.NewAttacher(core.Config{Client: kc, Reader: r, Logger: testfix.Quiet()})
			require.NoError(t, err)
			_, err = a.Attach(context.Background(), core.Event{Namespace: ns, Name: rs.Name, UID: uid, Options: core.DefaultOptions()})
			require.NoError(t, err)
			assert.Empty(t, asked)
		})
	}
}
