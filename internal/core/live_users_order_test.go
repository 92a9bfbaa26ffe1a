package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// LiveReader.Users lists the Pods before their controllers: a ReplicaSet created (with
// its Pods) while the lists run is then either absent with its Pods or present with them,
// never a Pod without its ReplicaSet, which would make the Pod an owner although the
// ReplicaSet covers it.
func TestLiveUsersNeverHoldAPodWithoutItsReplicaSet(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "rs-1"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", "cfg")}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1-a", Namespace: "shop", UID: "pod-1",
		OwnerReferences: []metav1.OwnerReference{*ctrl("apps/v1", "ReplicaSet", "web-1", "rs-1")}},
		Spec: podTemplate("web", "cfg").Spec}
	tests := []struct {
		name         string
		createBefore string // the LIST just before which the ReplicaSet and its Pod appear
		wantOwners   []string
	}{
		{name: "created before the Pod list, the first: the ReplicaSet owns, its Pod covered", createBefore: "pods", wantOwners: []string{"ReplicaSet/web-1"}},
		{name: "created after the Pod list: the ReplicaSet owns", createBefore: "replicasets", wantOwners: []string{"ReplicaSet/web-1"}},
		{name: "created after the ReplicaSet list: neither seen, the Pod no owner", createBefore: "controllerrevisions"},
		{name: "created before the Deployment list: neither seen", createBefore: "deployments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset()
			created := false
			kc.PrependReactor("list", tc.createBefore, func(k8stesting.Action) (bool, runtime.Object, error) {
				if !created { // the tracker's own reactor answers this LIST afterwards
					created = true
					require.NoError(t, kc.Tracker().Add(rs.DeepCopy()))
					require.NoError(t, kc.Tracker().Add(pod.DeepCopy()))
				}
				return false, nil, nil
			})
			r := core.LiveReader{Client: kc, Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"})}
			u, err := r.Users(context.Background(), core.KindConfigMap, "shop", "cfg")
			require.NoError(t, err)
			var got []string
			for _, o := range u.Owners() {
				got = append(got, o.String())
			}
			assert.Equal(t, tc.wantOwners, got)
		})
	}
}
