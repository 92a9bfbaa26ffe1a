package watch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A config object the service (or anyone) put in the garbage collector's hands with an
// owner of a kind the service adds is a candidate of the revision side: it is queued
// when it appears or loses an owner, so that its live users are attached (safety rule
// 11), whether or not it is labelled or listed.
func TestOwnedConfigObjectIsACandidate(t *testing.T) {
	f, tr := false, true
	owner := func(apiVersion, kind string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "u", Controller: controller}
	}
	cases := []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		want   bool
	}{
		{"unlabelled, no owners", nil, nil, false},
		{"opted in", map[string]string{"configmap-attacher.io/revision": "true"}, nil, true},
		{"owned by a ReplicaSet", nil, []metav1.OwnerReference{owner("apps/v1", "ReplicaSet", &f)}, true},
		{"owned by a ControllerRevision", nil, []metav1.OwnerReference{owner("apps/v1", "ControllerRevision", &f)}, true},
		{"owned by a StatefulSet", nil, []metav1.OwnerReference{owner("apps/v1", "StatefulSet", nil)}, true},
		{"owned by a DaemonSet", nil, []metav1.OwnerReference{owner("apps/v1", "DaemonSet", &f)}, true},
		{"owned by a Job", nil, []metav1.OwnerReference{owner("batch/v1", "Job", &f)}, true},
		{"owned by a CronJob", nil, []metav1.OwnerReference{owner("batch/v1", "CronJob", &f)}, true},
		{"owned by a Pod", nil, []metav1.OwnerReference{owner("v1", "Pod", &f)}, true},
		{"controlled by a Job (not how the service owns)", nil, []metav1.OwnerReference{owner("batch/v1", "Job", &tr)}, false},
		{"owned by another kind", nil, []metav1.OwnerReference{owner("external-secrets.io/v1", "ExternalSecret", &tr)}, false},
		{"a Pod of another group", nil, []metav1.OwnerReference{owner("example.com/v1", "Pod", &f)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &metav1.ObjectMeta{Name: "cfg", Namespace: "ns", Labels: tc.labels, OwnerReferences: tc.owners}
			assert.Equal(t, tc.want, candidate(m))
		})
	}
}
