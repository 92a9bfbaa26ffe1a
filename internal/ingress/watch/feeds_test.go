package watch

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

func okDispatcher() Dispatcher {
	return dispatcherFunc(func(context.Context, dispatch.Request) dispatch.Answer {
		return dispatch.Answer{Class: dispatch.ClassOK}
	})
}

// Each component needs an informer and a dispatcher, and is built of its own role only.
func TestComponentsNeedAnInformerAndADispatcher(t *testing.T) {
	fac := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	rs, cm := fac.Apps().V1().ReplicaSets().Informer(), fac.Core().V1().ConfigMaps().Informer()
	cases := []struct {
		name      string
		build     func() (*Watcher, error)
		wantKinds []string
	}{
		{"ReplicaSets", func() (*Watcher, error) { return NewReplicaSets(rs, okDispatcher(), Options{}) }, []string{"ReplicaSet"}},
		{"ReplicaSets without an informer", func() (*Watcher, error) { return NewReplicaSets(nil, okDispatcher(), Options{}) }, nil},
		{"ReplicaSets without a dispatcher", func() (*Watcher, error) { return NewReplicaSets(rs, nil, Options{}) }, nil},
		{"revisions", func() (*Watcher, error) {
			return NewRevisions(RevisionSources{Informers: map[core.Kind]toolscache.SharedIndexInformer{core.KindConfigMap: cm, core.KindSecret: nil}}, okDispatcher(), Options{})
		}, []string{"ConfigMap"}},
		{"revisions without an informer", func() (*Watcher, error) { return NewRevisions(RevisionSources{}, okDispatcher(), Options{}) }, nil},
		{"revisions without a dispatcher", func() (*Watcher, error) {
			return NewRevisions(RevisionSources{Informers: map[core.Kind]toolscache.SharedIndexInformer{core.KindConfigMap: cm}}, nil, Options{})
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := tc.build()
			if tc.wantKinds == nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.ElementsMatch(t, tc.wantKinds, w.kinds())
		})
	}
}

// The ReplicaSet way in admits every ReplicaSet and dispatches it as a ReplicaSet event
// on the watcher path; the revision side admits candidates only (labelled, owned, or
// listed by a workload) and dispatches them as revision events on the revision path.
func TestFeedsAdmitAndRequestByRole(t *testing.T) {
	listed := func(kind core.Kind, ns, name string) bool { return kind == core.KindConfigMap && name == "listed" }
	rev := revisionFeed{kind: core.KindConfigMap, listed: listed}
	cm := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "u", Labels: labels}}
	}
	base := dispatch.Request{Path: dispatch.PathWatcher, Event: core.Event{Cluster: "c", Namespace: "ns", Name: "x", UID: "u"}}
	cases := []struct {
		name      string
		f         feed
		obj       *corev1.ConfigMap
		wantAdmit bool
		wantPath  dispatch.Path
		wantRev   *core.RevisionEvent
	}{
		{"ReplicaSet: any object", replicaSetFeed{}, cm("x", nil), true, dispatch.PathWatcher, nil},
		{"revision: unlabelled, unlisted", rev, cm("x", nil), false, dispatch.PathRevision,
			&core.RevisionEvent{Cluster: "c", Kind: core.KindConfigMap, Namespace: "ns", Name: "x", UID: "u"}},
		{"revision: opted in", rev, cm("x", map[string]string{core.LabelRevision: "true"}), true, dispatch.PathRevision,
			&core.RevisionEvent{Cluster: "c", Kind: core.KindConfigMap, Namespace: "ns", Name: "x", UID: "u"}},
		{"revision: listed by a workload", rev, cm("listed", nil), true, dispatch.PathRevision,
			&core.RevisionEvent{Cluster: "c", Kind: core.KindConfigMap, Namespace: "ns", Name: "listed", UID: "u"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.wantAdmit, tc.f.admit(tc.obj))
			req := tc.f.request(base, tc.obj)
			assert.Equal(t, tc.wantPath, req.Path)
			assert.Equal(t, tc.wantRev, req.Revision)
			assert.Equal(t, base.Event, req.Event, "the event stays (GaveUp reports it)")
		})
	}
	assert.False(t, rev.admit("not an object"))
}

// The revision side queues an update only when it may leave a candidate short of owners:
// an owner lost, a namesake, or labels or annotations changed; data edits and owner
// additions are skipped, and so is an object that is no candidate before or after.
func TestRevisionUpdatesThatNeedALook(t *testing.T) {
	rev := revisionFeed{kind: core.KindConfigMap}
	owned := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg", UID: "u1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "r1"}}}}
	}
	cases := []struct {
		name   string
		old    func() *corev1.ConfigMap
		change func(*corev1.ConfigMap)
		want   bool
	}{
		{"data edit", owned, func(c *corev1.ConfigMap) { c.Data = map[string]string{"k": "v"} }, false},
		{"owner added", owned, func(c *corev1.ConfigMap) {
			c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{Kind: "ReplicaSet", Name: "rs2", UID: "r2"})
		}, false},
		{"owners wiped", owned, func(c *corev1.ConfigMap) { c.OwnerReferences = nil }, true},
		{"replaced by a namesake", owned, func(c *corev1.ConfigMap) { c.UID = "u2" }, true},
		{"opted in", func() *corev1.ConfigMap { c := owned(); c.OwnerReferences = nil; return c },
			func(c *corev1.ConfigMap) { c.Labels = map[string]string{core.LabelRevision: "true"} }, true},
		{"no candidate before or after", func() *corev1.ConfigMap { c := owned(); c.OwnerReferences = nil; return c },
			func(c *corev1.ConfigMap) { c.Labels = map[string]string{"app": "x"} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.old()
			upd := old.DeepCopy()
			tc.change(upd)
			assert.Equal(t, tc.want, rev.relevant(old, upd))
		})
	}
	assert.True(t, revisionNeedsLook("not an object", owned()), "unknown objects are not filtered")
}
