package gc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// Rule 7 for template history: a StatefulSet's earlier template lives on in a
// ControllerRevision, which `kubectl rollout undo` brings back (as an old ReplicaSet at 0
// replicas does for a Deployment). An opted-in revision only that ControllerRevision
// still uses is kept, by the live and the cached sweep alike; a true orphan beside it
// goes. The StatefulSet controller writes the ControllerRevisions.
func TestSweepKeepsARevisionAnEarlierStatefulSetTemplateUses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		source func(e *env, t *testing.T, clients *kube.Clients) gc.Source
	}{
		{"live lists", func(e *env, _ *testing.T, _ *kube.Clients) gc.Source { return e.source() }},
		{"caches", func(e *env, t *testing.T, clients *kube.Clients) gc.Source {
			return gc.CachedSource{Store: e.startCache(t, clients), Live: e.source()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			ctx := context.Background()
			for _, n := range []string{"db-cfg-1", "db-cfg-2", "db-cfg-3"} {
				e.configMap(t, n, "db", nil)
			}
			e.statefulSetHistory(t, "db", "db-cfg-1", "db-cfg-2")
			clients := e.countedClients(t, &kube.RequestCounter{})
			sw, err := gc.NewSweeper(gc.Config{Client: clients.Kube, Metadata: clients.Metadata, Source: tc.source(e, t, clients),
				Options: gc.Options{MinAge: 0, Keep: 0}})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := sw.SweepNamespace(ctx, e.ns)
			if err != nil {
				t.Fatal(err)
			}
			if !e.exists(t, "db-cfg-1") {
				t.Fatalf("the revision the earlier template uses was deleted: %+v", rep.Results)
			}
			if !e.exists(t, "db-cfg-2") {
				t.Fatalf("the revision the StatefulSet uses was deleted: %+v", rep.Results)
			}
			if e.exists(t, "db-cfg-3") {
				t.Fatalf("the orphan survived: %+v", rep.Results)
			}
		})
	}
}

// statefulSetHistory creates StatefulSet name (0 replicas) using cms[0], then moves
// its template through the rest, and waits for a ControllerRevision of each.
func (e *env) statefulSetHistory(t *testing.T, name string, cms ...string) {
	t.Helper()
	ctx := context.Background()
	lbl := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: lbl}, ServiceName: name,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: podSpecUsing(cms[0])}}}
	sts.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	apps := e.clients.Kube.AppsV1()
	if _, err := apps.StatefulSets(e.ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, cm := range cms {
		if i > 0 {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := apps.StatefulSets(e.ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name = cm
				_, err = apps.StatefulSets(e.ns).Update(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		controlplane.Eventually(t, time.Minute, fmt.Sprintf("%d ControllerRevisions of StatefulSet %s", i+1, name), func() error {
			list, err := apps.ControllerRevisions(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) < i+1 {
				return fmt.Errorf("%d ControllerRevisions (err %v)", len(list.Items), err)
			}
			return nil
		})
	}
}
