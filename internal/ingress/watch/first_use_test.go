package watch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// revisionLog records the revision events dispatched, as kind/name.
type revisionLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *revisionLog) Dispatch(_ context.Context, req dispatch.Request) dispatch.Answer {
	if req.Path == dispatch.PathRevision && req.Revision != nil {
		l.mu.Lock()
		l.seen = append(l.seen, string(req.Revision.Kind)+"/"+req.Revision.Name)
		l.mu.Unlock()
	}
	return dispatch.Answer{Class: dispatch.ClassOK}
}

func (l *revisionLog) GaveUp(dispatch.Path, core.Event, string, error) {}

func (l *revisionLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.seen
	l.seen = nil
	return out
}

// A ReplicaSet that appears using a candidate revision no owner holds yet is that
// revision's first use: the revision side looks at the revision again at once, so that
// it is attached from the cache whatever the way in (a GitOps sync creates the revision
// before its ReplicaSet, and the next sync can prune it until it is owned). A revision
// owned already, one that is no candidate, or one not cached is not looked at again.
func TestTheFirstUseOfAnUnownedRevisionQueuesIt(t *testing.T) {
	f := false
	held := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "old", UID: "old", Controller: &f}}
	controlled := []metav1.OwnerReference{{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: "es", UID: "es", Controller: new(true)}}
	optIn := map[string]string{core.LabelRevision: "true"}
	old := rsUsing("old", nil)
	old.UID = "old"
	oldGoing := old.DeepCopy()
	oldGoing.DeletionTimestamp, oldGoing.Finalizers = &metav1.Time{Time: time.Now()}, []string{"foregroundDeletion"}
	cases := []struct {
		name    string
		objects []any // config objects, and ReplicaSets, there before the ReplicaSet
		uses    []string
		want    []string
	}{
		{"an opted-in ConfigMap nobody owns", []any{cm("cfg", optIn, nil)}, []string{"cfg"}, []string{"ConfigMap/cfg"}},
		{"an opted-in Secret its ExternalSecret controls", []any{secret("creds", optIn, controlled)}, []string{"secret:creds"}, []string{"Secret/creds"}},
		{"an opted-in ConfigMap owned already", []any{old, cm("cfg", optIn, held)}, []string{"cfg"}, nil},
		{"a ConfigMap not opted in", []any{cm("cfg", nil, nil)}, []string{"cfg"}, nil},
		{"a ConfigMap not there", nil, []string{"cfg"}, nil},
		{"two revisions, one owned", []any{old, cm("a", optIn, nil), cm("b", optIn, held)}, []string{"a", "b"}, []string{"ConfigMap/a"}},
		// The garbage collector deletes an object whose owners are all gone, whoever uses
		// it: a revision whose only owner is a ReplicaSet deleted (the Deployment's history
		// limit, at once for a rollout of 0 replicas) or being deleted is held by no one.
		{"an opted-in ConfigMap whose only owner is gone", []any{cm("cfg", optIn, held)}, []string{"cfg"}, []string{"ConfigMap/cfg"}},
		{"an opted-in ConfigMap whose only owner is being deleted", []any{oldGoing, cm("cfg", optIn, held)}, []string{"cfg"}, []string{"ConfigMap/cfg"}},
		{"an unlabelled ConfigMap whose only owner is gone", []any{cm("cfg", nil, held)}, []string{"cfg"}, []string{"ConfigMap/cfg"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			for _, o := range tc.objects {
				switch o := o.(type) {
				case *corev1.ConfigMap:
					_, err := kc.CoreV1().ConfigMaps("ns").Create(ctx, o, metav1.CreateOptions{})
					require.NoError(t, err)
				case *corev1.Secret:
					_, err := kc.CoreV1().Secrets("ns").Create(ctx, o, metav1.CreateOptions{})
					require.NoError(t, err)
				case *appsv1.ReplicaSet:
					_, err := kc.AppsV1().ReplicaSets("ns").Create(ctx, o, metav1.CreateOptions{})
					require.NoError(t, err)
				}
			}
			fac := informers.NewSharedInformerFactory(kc, 0)
			rsInf := fac.Apps().V1().ReplicaSets().Informer()
			log := &revisionLog{}
			w, err := NewRevisions(RevisionSources{
				Informers:   map[core.Kind]toolscache.SharedIndexInformer{core.KindConfigMap: fac.Core().V1().ConfigMaps().Informer(), core.KindSecret: fac.Core().V1().Secrets().Informer()},
				ReplicaSets: rsInf, Uses: core.UsesKeys,
			}, log, Options{Workers: 1})
			require.NoError(t, err)
			fac.Start(ctx.Done())
			go func() { _ = w.Run(ctx) }()
			<-w.Replayed()
			log.take() // the start-up replay of the config objects

			_, err = kc.AppsV1().ReplicaSets("ns").Create(ctx, rsUsing("web-1", tc.uses), metav1.CreateOptions{})
			require.NoError(t, err)
			var got []string
			if tc.want != nil {
				require.Eventually(t, func() bool { got = append(got, log.take()...); return len(got) >= len(tc.want) },
					5*time.Second, 10*time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // nothing else comes
			got = append(got, log.take()...)
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}

func cm(name string, labels map[string]string, owners []metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, OwnerReferences: owners}}
}

func secret(name string, labels map[string]string, owners []metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, OwnerReferences: owners}}
}

// rsUsing is a ReplicaSet whose template mounts each of uses as a volume: a ConfigMap,
// or a Secret when prefixed "secret:".
func rsUsing(name string, uses []string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "rs-uid"}}
	for _, u := range uses {
		v := corev1.Volume{Name: u}
		if s, ok := strings.CutPrefix(u, "secret:"); ok {
			v.Name, v.Secret = s, &corev1.SecretVolumeSource{SecretName: s}
		} else {
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: u}}
		}
		rs.Spec.Template.Spec.Volumes = append(rs.Spec.Template.Spec.Volumes, v)
	}
	return rs
}

// A ReplicaSet deleted (a Deployment's history limit of 0 deletes the one before as soon
// as a rollout of 0 replicas completes) leaves the revisions it alone owned to the
// garbage collector, whoever else uses them: the revision side looks at each again at
// once, so that its other live users are attached from the cache before the collector
// deletes it, without waiting for the new ReplicaSet's event. A revision another live
// ReplicaSet owns too is not looked at.
func TestAReplicaSetDeletedQueuesTheRevisionsItAloneHeld(t *testing.T) {
	f := false
	ref := func(name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: types.UID(name), Controller: &f}
	}
	optIn := map[string]string{core.LabelRevision: "true"}
	kc := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, rs := range []string{"old", "keeper"} {
		o := rsUsing(rs, []string{"alone", "shared"})
		o.UID = types.UID(rs)
		_, err := kc.AppsV1().ReplicaSets("ns").Create(ctx, o, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, c := range []*corev1.ConfigMap{
		cm("alone", optIn, []metav1.OwnerReference{ref("old")}),
		cm("shared", optIn, []metav1.OwnerReference{ref("old"), ref("keeper")}),
	} {
		_, err := kc.CoreV1().ConfigMaps("ns").Create(ctx, c, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	fac := informers.NewSharedInformerFactory(kc, 0)
	log := &revisionLog{}
	w, err := NewRevisions(RevisionSources{
		Informers:   map[core.Kind]toolscache.SharedIndexInformer{core.KindConfigMap: fac.Core().V1().ConfigMaps().Informer()},
		ReplicaSets: fac.Apps().V1().ReplicaSets().Informer(), Uses: core.UsesKeys,
	}, log, Options{Workers: 1})
	require.NoError(t, err)
	fac.Start(ctx.Done())
	go func() { _ = w.Run(ctx) }()
	<-w.Replayed()
	log.take()

	require.NoError(t, kc.AppsV1().ReplicaSets("ns").Delete(ctx, "old", metav1.DeleteOptions{}))
	var got []string
	require.Eventually(t, func() bool { got = append(got, log.take()...); return len(got) >= 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // nothing else comes
	assert.ElementsMatch(t, []string{"ConfigMap/alone"}, append(got, log.take()...))
}

// Once a Deployment or Rollout informer started on demand has synced, the revision side
// looks again at the config objects its workloads list (cache.Cache.OnListersSynced),
// and only at those: a listed object is dispatched, an unlisted one (opted in or not),
// one not there, a key of another kind or a malformed key is not.
func TestLookAgainDispatchesOnlyTheListedConfigObjects(t *testing.T) {
	kc := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, o := range []*corev1.ConfigMap{cm("listed", nil, nil), cm("opted-in", map[string]string{core.LabelRevision: "true"}, nil), cm("other", nil, nil)} {
		_, err := kc.CoreV1().ConfigMaps("ns").Create(ctx, o, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	fac := informers.NewSharedInformerFactory(kc, 0)
	listed := func(_ core.Kind, _, name string) bool { return name == "listed" }
	log := &revisionLog{}
	w, err := NewRevisions(RevisionSources{Informers: map[core.Kind]toolscache.SharedIndexInformer{
		core.KindConfigMap: fac.Core().V1().ConfigMaps().Informer()}, Listed: listed}, log, Options{Workers: 1, Resync: -1})
	require.NoError(t, err)
	fac.Start(ctx.Done())
	go func() { _ = w.Run(ctx) }()
	<-w.Replayed()
	log.take() // the start-up replay

	w.LookAgain([]string{core.UsesKey(core.KindConfigMap, "ns", "listed"), core.UsesKey(core.KindConfigMap, "ns", "gone"),
		core.UsesKey(core.KindSecret, "ns", "listed"), "malformed"})
	var got []string
	require.Eventually(t, func() bool { got = append(got, log.take()...); return len(got) >= 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // nothing else comes
	assert.Equal(t, []string{"ConfigMap/listed"}, append(got, log.take()...))
}
