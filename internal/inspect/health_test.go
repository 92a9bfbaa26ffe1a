package inspect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ReplicaSet's health: scaled down at 0 replicas, healthy when every replica is ready.
func TestReplicaSetHealthFollowsItsReadyReplicas(t *testing.T) {
	for _, tc := range []struct {
		replicas, ready int32
		want            string
	}{
		{0, 0, HealthScaledDown},
		{2, 2, HealthHealthy},
		{2, 1, HealthProgressing},
	} {
		assert.Equal(t, tc.want, replicaSetHealth(&ReplicaSetStatus{Replicas: tc.replicas, ReadyReplicas: tc.ready}), "%d/%d", tc.ready, tc.replicas)
	}
}

// A Deployment's health as `kubectl argo rollouts get` shows it: degraded past its
// progress deadline, healthy when every replica is updated and available.
func TestDeploymentHealthFollowsItsConditions(t *testing.T) {
	two := int32(2)
	for _, tc := range []struct {
		name        string
		status      appsv1.DeploymentStatus
		want, wantM string
	}{
		{name: "every replica updated and available", status: appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2},
			want: HealthHealthy},
		{name: "one available", status: appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1},
			want: HealthProgressing, wantM: "1 of 2 updated replicas available"},
		{name: "past its progress deadline", status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "timed out"}}},
			want: HealthDegraded, wantM: "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: &two}, Status: tc.status}
			d.Status.ObservedGeneration = 1
			h, m := deploymentHealth(d)
			assert.Equal(t, tc.want, h)
			assert.Equal(t, tc.wantM, m)
		})
	}
}
