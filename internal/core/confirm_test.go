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

// cachedReader is a mapReader that is also a core.ReplicaSetCache: the cache holds
// cached (nil: a miss).
type cachedReader struct {
	mapReader
	cached *appsv1.ReplicaSet
}

func (c cachedReader) CachedReplicaSet(_, name string) (*appsv1.ReplicaSet, bool) {
	if c.cached == nil || c.cached.Name != name {
		return nil, false
	}
	return c.cached, true
}

// Safety rules 1-2 with a cache: a cached ReplicaSet is confirmed live right before the
// write (one GET); one the cache has not seen is read live, and confirmed again right
// before the write (the plan runs in between); gone or terminating live, nothing is
// written.
func TestLiveConfirmRightBeforeEveryWrite(t *testing.T) {
	const ns = "shop"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: "rs-2"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", "cfg")}}
	older := rs.DeepCopy()
	older.UID = "rs-1" // a namesake the cache still holds
	terminating := rs.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{}
	cm := metav1.ObjectMeta{Namespace: ns, Name: "cfg", UID: "cm", ResourceVersion: "1", Labels: map[string]string{core.LabelRevision: "true"}}
	cases := []struct {
		name    string
		cached  *appsv1.ReplicaSet
		live    *appsv1.ReplicaSet // nil: gone
		gets    int
		patches int
		refused bool
	}{
		{"cached: confirmed live", rs, rs, 1, 1, false},
		{"not cached yet: read live, then confirmed", nil, rs, 2, 1, false},
		{"cache holds an older namesake: read live, then confirmed", older, rs, 2, 1, false},
		{"not cached and gone", nil, nil, 1, 0, true},
		{"not cached and terminating", nil, terminating, 1, 0, true},
		{"cached and gone live", rs, nil, 1, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{&corev1.ConfigMap{ObjectMeta: cm}}
			if tc.live != nil {
				objs = append(objs, tc.live)
			}
			kc := fake.NewClientset(objs...)
			r := cachedReader{mapReader: mapReader{meta: map[string]*metav1.PartialObjectMetadata{"ConfigMap/cfg": {ObjectMeta: cm}}},
				cached: tc.cached}
			a, err := core.NewAttacher(core.Config{Client: kc, Reader: r, Logger: testfix.Quiet()})
			require.NoError(t, err)
			_, err = a.Attach(context.Background(), core.Event{Namespace: ns, Name: rs.Name, UID: types.UID("rs-2"), Options: core.DefaultOptions()})
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
		})
	}
}
