package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// revisionRecorder answers every event OK and remembers the config objects of the
// revision events it was given.
type revisionRecorder struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (r *revisionRecorder) Dispatch(_ context.Context, req dispatch.Request) dispatch.Answer {
	if req.Path == dispatch.PathRevision && req.Revision != nil {
		r.mu.Lock()
		r.seen[req.Revision.Name] = true
		r.mu.Unlock()
	}
	return dispatch.Answer{Class: dispatch.ClassOK}
}

func (r *revisionRecorder) GaveUp(dispatch.Path, core.Event, string, error) {}

func (r *revisionRecorder) saw(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen[name] {
		return fmt.Errorf("no revision event for %s", name)
	}
	return nil
}

// The Deployment informer starts only once the cluster needs it (here: a ReplicaSet a
// Deployment controls appears), so the revision side's start-up replay passes over an
// unlabelled ConfigMap that only a Deployment lists; once that informer has synced the
// revision side looks at every config object again and dispatches it, without waiting for
// the periodic resync (an hour here): the lazy start loses no listing (docs/design.md,
// "Per-cluster cost").
func TestAConfigMapListedOnlyByADeploymentIsDispatchedOnceDeploymentsAreCached(t *testing.T) {
	cp := cpA
	if cp == nil {
		t.Skip("integration test: needs the local control plane (not started with -short)")
	}
	ctx := context.Background()
	kc := cp.Client()
	ns := fmt.Sprintf("lazy-listers-%d", time.Now().UnixNano())
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labels := map[string]string{"app": "web"}
	zero := int32(0)
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	dep, err := kc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{core.AnnotationConfigMaps: "cfg"}},
		Spec: appsv1.DeploymentSpec{Paused: true, Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: tmpl}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// "cfg" sorts before "zz-marker": once the marker's replay event is seen, the
	// start-up replay has passed over cfg.
	for name, l := range map[string]map[string]string{"cfg": nil, "zz-marker": {core.LabelRevision: "true"}} {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	rec := &revisionRecorder{seen: map[string]bool{}}
	rt, err := NewRuntime(Spec{Name: "lazy", Config: cp.RESTConfig()}, RuntimeOptions{Namespace: ns, Dispatcher: rec,
		Watch: WatchOptions{ReplicaSets: true, Resync: time.Hour}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(rctx) }()
	defer func() { stop(); <-done }()
	controlplane.Eventually(t, 30*time.Second, "the start-up replay past cfg", func() error { return rec.saw("zz-marker") })

	_, err = kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: new(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "cfg dispatched once Deployments are cached", func() error { return rec.saw("cfg") })
}
