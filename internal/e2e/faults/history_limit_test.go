package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// A Deployment of 0 replicas (scaled to zero) with revisionHistoryLimit 0 deletes the
// ReplicaSet before as soon as a rollout completes: at once. A revision its new template
// uses too, owned by that ReplicaSet alone, is then the garbage collector's, which deletes
// it within moments, long before an event pushed through a Sensor could make the new
// ReplicaSet an owner. The service, with no way in but its revision side, keeps it: the
// new ReplicaSet owns it, and it is never deleted.
func TestARevisionTheHistoryLimitLeavesToTheCollectorIsKeptForItsNewReplicaSet(t *testing.T) {
	ns, kc := newNamespace(t, "history0")
	startService(t, nil, "--log-level", "info")
	ctx := context.Background()
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared",
		Labels: map[string]string{core.LabelRevision: "true"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	owners := watchOwners(t, kc, ns)
	zero, labels := int32(0), map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: &zero, RevisionHistoryLimit: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"v": "1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}},
			}}}}},
	}}
	dep, err = kc.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	ownedBy := func(rev string) error {
		rss, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, rs := range rss.Items {
			if rs.Annotations["deployment.kubernetes.io/revision"] == rev && owners.everOwnedBy("shared", rs.UID) {
				return nil
			}
		}
		return fmt.Errorf("shared not owned by the ReplicaSet of revision %s yet", rev)
	}
	controlplane.Eventually(t, 30*time.Second, "the first ReplicaSet owns the revision", func() error { return ownedBy("1") })

	dep, err = kc.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	dep.Spec.Template.Annotations["v"] = "2"
	_, err = kc.AppsV1().Deployments(ns).Update(ctx, dep, metav1.UpdateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "the ReplicaSet before deleted by the history limit", func() error {
		rss, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(rss.Items) != 1 || rss.Items[0].Annotations["deployment.kubernetes.io/revision"] != "2" {
			return fmt.Errorf("ReplicaSets: %v (%v)", len(rss.Items), err)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // the garbage collector's time
	_, err = kc.CoreV1().ConfigMaps(ns).Get(ctx, "shared", metav1.GetOptions{})
	assert.False(t, apierrors.IsNotFound(err), "the revision the new ReplicaSet uses was deleted")
	assert.NoError(t, ownedBy("2"))
	assert.Zero(t, owners.deletions(), "ConfigMaps deleted")
}
