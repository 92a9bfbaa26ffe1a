package gc

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// fakeLiveSource is a LiveSource over fake clients holding, in namespace ns, the
// revisions cm-a and cm-b (cm-c is not opted in), ReplicaSets rs-1 and rs-2 and a Pod.
func fakeLiveSource(t *testing.T, ns string) (LiveSource, *fake.Clientset, *dynfake.FakeDynamicClient) {
	t.Helper()
	meta := func(name string, optIn bool) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "7"}}
		if optIn {
			m.Labels = map[string]string{core.LabelRevision: "true"}
		}
		return m
	}
	scheme := metafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := metafake.NewSimpleMetadataClient(scheme, meta("cm-a", true), meta("cm-b", true), meta("cm-c", false))
	rs := func(name string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, UID: "uid-p"}}
	kc := fake.NewClientset(rs("rs-1"), rs("rs-2"), pod)
	dc := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"})
	return LiveSource{Client: kc, Dynamic: dc, Metadata: mc}, kc, dc
}

func TestLiveSourceSnapshotConcurrentLists(t *testing.T) {
	src, _, _ := fakeLiveSource(t, "ns")
	for i := 0; i < 20; i++ { // the lists race; the snapshot must not depend on who answers first
		s, err := src.Snapshot(context.Background(), "ns")
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Revisions) != 2 || s.Revisions[0].Name != "cm-a" || s.Revisions[1].Name != "cm-b" {
			t.Fatalf("revisions %+v, want the opted-in cm-a, cm-b", s.Revisions)
		}
		var names []string
		for _, w := range s.Workloads {
			names = append(names, w.Kind+"/"+w.Name)
		}
		if got := strings.Join(names, ","); got != "ReplicaSet/rs-1,ReplicaSet/rs-2,Pod/p" {
			t.Fatalf("workloads %s, want ReplicaSets then the Pod", got)
		}
		for _, gk := range []schema.GroupKind{GKReplicaSet, GKDeployment, GKStatefulSet, GKDaemonSet, GKJob, GKCronJob, GKPod, GKRollout} {
			if !s.Listed[gk] {
				t.Fatalf("%v not marked listed", gk)
			}
		}
		if !s.Live["uid-rs-1"] || !s.Live["uid-p"] || len(s.Live) != 3 {
			t.Fatalf("live %v", s.Live)
		}
	}
}

func TestLiveSourceSnapshotFailedList(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"transient", apierrors.NewInternalError(errors.New("etcd hiccup")), true},
		{"forbidden", apierrors.NewForbidden(gr, "", errors.New("no list on pods")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, kc, _ := fakeLiveSource(t, "ns")
			kc.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			s, err := src.Snapshot(context.Background(), "ns")
			if err == nil || s != nil {
				t.Fatalf("snapshot %v, error %v: want no snapshot and an error", s, err)
			}
			if !strings.Contains(err.Error(), "listing Pods in ns") || errors.Is(err, context.Canceled) {
				t.Fatalf("error %q: want the failed list named, not the cancellation of the others", err)
			}
			if errors.Is(err, core.ErrUnavailable) != tc.transient {
				t.Fatalf("error %q: transient = %v, want %v", err, errors.Is(err, core.ErrUnavailable), tc.transient)
			}
		})
	}
}

func TestLiveSourceSnapshotNoRolloutCRD(t *testing.T) {
	src, _, dc := fakeLiveSource(t, "ns")
	dc.PrependReactor("list", "rollouts", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}, "")
	})
	s, err := src.Snapshot(context.Background(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Listed[GKRollout] {
		t.Fatal("no Rollout CRD: the kind must still count as listed (no Rollout can own anything)")
	}
}

func TestLiveSourceSnapshotCancelled(t *testing.T) {
	src, _, _ := fakeLiveSource(t, "ns")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Snapshot(ctx, "ns"); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v: a cancelled caller gets its cancellation", err)
	}
}
