package watch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRelevantUpdate(t *testing.T) {
	base := func() *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1", Generation: 1, ResourceVersion: "10",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "1"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Rollout", Name: "web", UID: "r1"}}}}
	}
	cases := []struct {
		name   string
		change func(*appsv1.ReplicaSet)
		want   bool
	}{
		{"status only (replicas, resourceVersion)", func(rs *appsv1.ReplicaSet) { rs.ResourceVersion = "11"; rs.Status.Replicas = 3 }, false},
		{"resync (no change)", func(*appsv1.ReplicaSet) {}, false},
		{"spec change (generation)", func(rs *appsv1.ReplicaSet) { rs.Generation = 2 }, true},
		{"recreated (UID)", func(rs *appsv1.ReplicaSet) { rs.UID = "u2" }, true},
		{"owner change", func(rs *appsv1.ReplicaSet) { rs.OwnerReferences = nil }, true},
		{"label change", func(rs *appsv1.ReplicaSet) { rs.Labels["rollouts-pod-template-hash"] = "x" }, true},
		{"annotation change", func(rs *appsv1.ReplicaSet) { rs.Annotations["configmap-attacher.io/configmaps"] = "a" }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, upd := base(), base()
			tc.change(upd)
			assert.Equal(t, tc.want, relevantUpdate(old, upd))
		})
	}
	assert.True(t, relevantUpdate("not a ReplicaSet", base()), "unknown objects are not filtered")
}
