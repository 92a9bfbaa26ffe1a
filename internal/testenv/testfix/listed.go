package testfix

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// ListedFixture creates, in cp, namespace ns (if missing), ConfigMap cm and a ReplicaSet
// rsName (0 replicas) whose pod template mounts cm, and returns the ReplicaSet and a
// function reading cm's owner UIDs live. The ConfigMap is listed by the ReplicaSet's
// annotation, not labelled, and created before it: a running service's revision side
// usually sees it with no ReplicaSet listing it yet and leaves it alone, but may find the
// ReplicaSet already there and attach it to that cluster's own ReplicaSet. A test that
// asks which cluster an event went to checks the owner's UID, not that the other
// cluster's copy has no owner.
func ListedFixture(t testing.TB, cp *controlplane.ControlPlane, ns, rsName, cm string) (*appsv1.ReplicaSet, func(*testing.T) []string) {
	t.Helper()
	ctx := context.Background()
	kc := cp.Client()
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm},
		Data: map[string]string{"cluster": cp.Name()}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labels := map[string]string{"app": rsName}
	zero := int32(0)
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: rsName, Labels: labels, Annotations: map[string]string{core.AnnotationConfigMaps: cm}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "app:1"}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	owners := func(t *testing.T) []string {
		t.Helper()
		got, err := kc.CoreV1().ConfigMaps(ns).Get(context.Background(), cm, metav1.GetOptions{})
		require.NoError(t, err)
		var out []string
		for _, o := range got.OwnerReferences {
			out = append(out, string(o.UID))
		}
		return out
	}
	return rs, owners
}
