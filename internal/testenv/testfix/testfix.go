// Package testfix holds the fixtures tests share: ReplicaSets and ConfigMaps shaped as
// the product sees them, and a quiet logger. Only tests import it; the shipped binary
// never links it (internal/layout's test checks that).
package testfix

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Quiet is a logger that drops everything.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// ReplicaSet is a ReplicaSet of zero replicas whose pod template mounts ConfigMap cm.
func ReplicaSet(name, cm string) *appsv1.ReplicaSet {
	zero := int32(0)
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "i"}},
				Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}}},
	}
}

// CreateReplicaSet creates ReplicaSet(name, cm) in ns.
func CreateReplicaSet(t testing.TB, kc kubernetes.Interface, ns, name, cm string) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(context.Background(), ReplicaSet(name, cm), metav1.CreateOptions{})
	require.NoError(t, err)
	return rs
}

// Revision is an opted-in ConfigMap revision.
func Revision(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{core.LabelRevision: "true"}}, Data: map[string]string{"k": "v"}}
}

// CreateNamespace creates namespace ns.
func CreateNamespace(t testing.TB, kc kubernetes.Interface, ns string) {
	t.Helper()
	_, err := kc.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// CreateNamespaceFor creates a namespace named prefix plus a suffix the apiserver picks
// (so a test may run -count=N on one control plane) and returns its name.
func CreateNamespaceFor(t testing.TB, kc kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := kc.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns.Name
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers and readers (a logger's or a
// running command's output read while it runs). The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset empties the buffer.
func (s *SyncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// AttachedEvents counts the "Attached" Events on ConfigMap name in ns, each with its
// count (the recorder aggregates repeats into one Event).
func AttachedEvents(ctx context.Context, kc kubernetes.Interface, ns, name string) (int, error) {
	list, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=" + name + ",reason=Attached"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
	}
	return n, nil
}
