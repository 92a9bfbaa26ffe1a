package cache

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// An informer the namespace index cannot answer for must not read as "no workloads in
// this namespace": the sweep would find every revision unreferenced. Workloads has to
// say it cannot answer completely (false), never drop the error.
func TestSweepWorkloadsIndexErrorIsNotAnEmptyNamespace(t *testing.T) {
	noIndex := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &appsv1.ReplicaSet{}, 0, toolscache.Indexers{})
	withIndex := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &appsv1.Deployment{}, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := noIndex.GetStore().Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "rs-1"}}); err != nil {
		t.Fatal(err)
	}
	c := &Cache{rsInf: noIndex, depInf: withIndex, absentAt: time.Now()}
	objs, complete := c.Workloads(context.Background(), "ns")
	if complete && len(objs) == 0 {
		t.Fatal("Workloads answered complete with no workload although the ReplicaSet index failed: the sweep would delete what web-1 uses")
	}
}
