package gc

import (
	"context"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// countingStore is a synced store that counts its Workloads reads.
type countingStore struct {
	staleStore
	workloads *atomic.Int64
}

func (s countingStore) Workloads(ctx context.Context, ns string) ([]any, bool) {
	s.workloads.Add(1)
	return s.staleStore.Workloads(ctx, ns)
}

// A snapshot from the caches reads the workloads only for a namespace that has
// revisions: one without any plans nothing, and reading its workloads would start a
// cluster's user informers for nothing (docs/design.md, "Per-cluster cost").
func TestCachedSnapshotReadsWorkloadsOnlyWithRevisions(t *testing.T) {
	rev := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns", UID: "uid-cfg",
		Labels: map[string]string{core.LabelRevision: "true"}}}
	other := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns", UID: "uid-ca"}}
	tests := []struct {
		name          string
		objs          []*metav1.PartialObjectMetadata
		wantWorkloads int64
		wantRevisions int
	}{
		{name: "no ConfigMap: workloads not read", wantWorkloads: 0},
		{name: "only ConfigMaps that are not revisions: workloads not read", objs: []*metav1.PartialObjectMetadata{other}, wantWorkloads: 0},
		{name: "a revision: workloads read", objs: []*metav1.PartialObjectMetadata{rev, other}, wantWorkloads: 1, wantRevisions: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &atomic.Int64{}
			src := CachedSource{Store: countingStore{staleStore: staleStore{revs: tc.objs}, workloads: n}}
			s, err := src.Snapshot(context.Background(), "ns")
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Load(); got != tc.wantWorkloads {
				t.Fatalf("Workloads read %d times, want %d", got, tc.wantWorkloads)
			}
			if len(s.Revisions) != tc.wantRevisions {
				t.Fatalf("%d revisions, want %d", len(s.Revisions), tc.wantRevisions)
			}
		})
	}
}
