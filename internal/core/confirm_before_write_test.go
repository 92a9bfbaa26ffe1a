package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// duringPlanReader is a cachedReader (a miss: the Attach reads the ReplicaSet live)
// whose Users read, made while the Attach plans its writes, runs hook first: the
// ReplicaSet changes between the live read and the write.
type duringPlanReader struct {
	cachedReader
	hook func()
}

func (r duringPlanReader) Users(ctx context.Context, kind core.Kind, ns, name string) (*core.Users, error) {
	if r.hook != nil {
		r.hook()
	}
	return r.cachedReader.Users(ctx, kind, ns, name)
}

// Breaker s5, safety rule 2: a ReplicaSet the cache has not seen is read live once, and
// that read is taken as the live confirm. But the read comes before the plan (config
// metadata, the users of every reference: live reads on a cache miss), not right before
// the write: a ReplicaSet deleted or marked for deletion meanwhile is still written as an
// owner. With a cache hit the same change is caught by confirmLive after the plan.
func TestFreshReadIsNotAConfirmRightBeforeTheWrite(t *testing.T) {
	const ns = "shop"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: "rs-2"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", "cfg")}}
	cm := metav1.ObjectMeta{Namespace: ns, Name: "cfg", UID: "cm", ResourceVersion: "1", Labels: map[string]string{core.LabelRevision: "true"}}
	rsGVR := appsv1.SchemeGroupVersion.WithResource("replicasets")
	for _, tc := range []struct {
		name   string
		cached *appsv1.ReplicaSet
		change func(kc *fake.Clientset) error
	}{
		{"not cached, marked for deletion during the plan", nil, func(kc *fake.Clientset) error {
			t := rs.DeepCopy()
			t.DeletionTimestamp = &metav1.Time{}
			t.Finalizers = []string{metav1.FinalizerDeleteDependents}
			return kc.Tracker().Update(rsGVR, t, ns)
		}},
		{"not cached, deleted during the plan", nil, func(kc *fake.Clientset) error {
			return kc.Tracker().Delete(rsGVR, ns, rs.Name)
		}},
		{"cached, deleted during the plan (control)", rs, func(kc *fake.Clientset) error {
			return kc.Tracker().Delete(rsGVR, ns, rs.Name)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: cm}, rs.DeepCopy())
			once := false
			r := duringPlanReader{cachedReader: cachedReader{mapReader: mapReader{meta: map[string]*metav1.PartialObjectMetadata{"ConfigMap/cfg": {ObjectMeta: cm}}},
				cached: tc.cached}, hook: func() {
				if !once {
					once = true
					require.NoError(t, tc.change(kc))
				}
			}}
			a, err := core.NewAttacher(core.Config{Client: kc, Reader: r, Logger: testfix.Quiet()})
			require.NoError(t, err)
			_, err = a.Attach(context.Background(), core.Event{Namespace: ns, Name: rs.Name, UID: types.UID("rs-2"), Options: core.DefaultOptions()})
			patches := 0
			for _, act := range kc.Actions() {
				if act.GetVerb() == "patch" {
					patches++
				}
			}
			assert.Zero(t, patches, "an owner gone or terminating before the write is not written (err %v)", err)
		})
	}
}

// Breaker s5 (low): an event without a UID (a bare namespace/name: a trigger spec, the
// old Job's form) for a ReplicaSet the cache still holds as an older namesake (deleted
// and recreated, the cache lagging) is refused as "replaced", though the live ReplicaSet
// it names is the one to attach to and the confirm read it already. With a UID the same
// lag is handled (resolveReplicaSet reads live).
func TestStaleNamesakeWithoutEventUIDAttachesTheLiveOne(t *testing.T) {
	const ns = "shop"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: "rs-2"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", "cfg")}}
	older := rs.DeepCopy()
	older.UID = "rs-1"
	cm := metav1.ObjectMeta{Namespace: ns, Name: "cfg", UID: "cm", ResourceVersion: "1", Labels: map[string]string{core.LabelRevision: "true"}}
	kc := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: cm}, rs)
	r := cachedReader{mapReader: mapReader{meta: map[string]*metav1.PartialObjectMetadata{"ConfigMap/cfg": {ObjectMeta: cm}}}, cached: older}
	a, err := core.NewAttacher(core.Config{Client: kc, Reader: r, Logger: testfix.Quiet()})
	require.NoError(t, err)
	res, err := a.Attach(context.Background(), core.Event{Namespace: ns, Name: rs.Name, Options: core.DefaultOptions()})
	require.NoError(t, err)
	assert.Equal(t, types.UID("rs-2"), res.UID)
}
