package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// ownedWorld is a namespace "shop" on a fake clientset: team B's ReplicaSets b-1 (the
// first owner, as the service left it after team A's listing) and b-2 (the next one,
// just created), both mounting the config objects named in the case.
type ownedWorld struct {
	kc     *fake.Clientset
	reader usersReader
	b1, b2 *appsv1.ReplicaSet
}

// usersReader is mapReader with the users of each config object fixed.
type usersReader struct {
	mapReader
	users map[string]*core.Users // "Kind/name"
}

func (r usersReader) Users(_ context.Context, kind core.Kind, _, name string) (*core.Users, error) {
	if u, ok := r.users[string(kind)+"/"+name]; ok {
		return u, nil
	}
	return &core.Users{}, nil
}

func newOwnedWorld(t *testing.T, configMaps ...*corev1.ConfigMap) *ownedWorld {
	t.Helper()
	var names []string
	for _, cm := range configMaps {
		names = append(names, cm.Name)
	}
	rs := func(name string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name + "-uid")},
			Spec: appsv1.ReplicaSetSpec{Template: podTemplate("b", names...)}}
	}
	w := &ownedWorld{b1: rs("b-1"), b2: rs("b-2")}
	w.reader = usersReader{
		mapReader: mapReader{rs: map[string]*appsv1.ReplicaSet{"b-1": w.b1, "b-2": w.b2}, meta: map[string]*metav1.PartialObjectMetadata{}},
		users:     map[string]*core.Users{},
	}
	objs := []runtime.Object{w.b1, w.b2}
	for _, cm := range configMaps {
		cm.Namespace, cm.UID, cm.ResourceVersion = "shop", types.UID("cm-"+cm.Name), "1"
		w.reader.meta["ConfigMap/"+cm.Name] = &metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta}
		w.reader.users["ConfigMap/"+cm.Name] = &core.Users{ReplicaSets: []*appsv1.ReplicaSet{w.b1, w.b2}}
		objs = append(objs, cm)
	}
	w.kc = fake.NewClientset(objs...)
	return w
}

func (w *ownedWorld) attacher(t *testing.T) *core.Attacher {
	t.Helper()
	a, err := core.NewAttacher(core.Config{Cluster: "unit", Client: w.kc, Reader: w.reader, Logger: testfix.Quiet()})
	require.NoError(t, err)
	return a
}

func (w *ownedWorld) ownerUIDs(t *testing.T, name string) []types.UID {
	t.Helper()
	cm, err := w.kc.CoreV1().ConfigMaps("shop").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return ownerUIDs(cm.OwnerReferences)
}

func ownedBy(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name + "-uid"), Controller: ptr(controller)}
}

func cmWith(name string, lbls, ann map[string]string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, Annotations: ann, OwnerReferences: owners}}
}

// Safety rule 11 on the ReplicaSet side: a config object that already carries an owner
// of a kind the service adds is in the garbage collector's hands, so a new ReplicaSet
// whose template uses it is attached too, with the reason, although the object is
// neither opted in nor listed; everything else keeps rule 4.
func TestOnceOwnedEveryLaterReplicaSetIsAttached(t *testing.T) {
	b1 := ownedBy("apps/v1", "ReplicaSet", "b-1", false)
	cases := []struct {
		name   string
		cm     *corev1.ConfigMap
		opts   func(*core.Options)
		want   core.Outcome
		reason string
		owners []types.UID // after the attach
	}{
		{"unlabelled, owned by the previous ReplicaSet: attached", cmWith("shared", nil, nil, b1),
			nil, core.OutcomeAttached, "already owned by ReplicaSet b-1", []types.UID{"b-1-uid", "b-2-uid"}},
		{"owned by a StatefulSet's ControllerRevision: attached", cmWith("shared", nil, nil, ownedBy("apps/v1", "ControllerRevision", "db-7f", false)),
			nil, core.OutcomeAttached, "ControllerRevision db-7f", []types.UID{"db-7f-uid", "b-2-uid"}},
		{"owned by a Job: attached", cmWith("shared", nil, nil, ownedBy("batch/v1", "Job", "migrate", false)),
			nil, core.OutcomeAttached, "Job migrate", []types.UID{"migrate-uid", "b-2-uid"}},
		{"owned by a bare Pod: attached", cmWith("shared", nil, nil, ownedBy("v1", "Pod", "debug", false)),
			nil, core.OutcomeAttached, "Pod debug", []types.UID{"debug-uid", "b-2-uid"}},
		{"owned, discovery off but the event lists it: attached", cmWith("shared", nil, nil, b1),
			func(o *core.Options) { o.Discover, o.ConfigMaps = false, []string{"shared"} }, core.OutcomeAttached, "", []types.UID{"b-1-uid", "b-2-uid"}},
		{"opted in but outside the event's selector, owned: attached (the selector narrows the opt-in only)",
			cmWith("shared", map[string]string{core.LabelRevision: "true"}, nil, b1),
			func(o *core.Options) { o.Selector = labels.SelectorFromSet(labels.Set{"team": "a"}) }, core.OutcomeAttached, "already owned", []types.UID{"b-1-uid", "b-2-uid"}},
		{"unlabelled, no owners: skipped (rule 4)", cmWith("shared", nil, nil),
			nil, core.OutcomeSkipped, "not opted in", nil},
		{"controlled by a ReplicaSet (not how the service owns): skipped", cmWith("shared", nil, nil, ownedBy("apps/v1", "ReplicaSet", "b-1", true)),
			nil, core.OutcomeSkipped, "not opted in", []types.UID{"b-1-uid"}},
		{"owned by another kind (an ExternalSecret): skipped", cmWith("shared", nil, nil, ownedBy("external-secrets.io/v1", "ExternalSecret", "es", true)),
			nil, core.OutcomeSkipped, "not opted in", []types.UID{"es-uid"}},
		{"owned and skip=true: skipped, saying what the skip leaves", cmWith("shared", nil, map[string]string{core.AnnotationSkip: "true"}, b1),
			nil, core.OutcomeSkipped, "remove its ownerReferences to keep it", []types.UID{"b-1-uid"}},
		{"already owned by the new ReplicaSet too: no write, no reason", cmWith("shared", nil, nil, b1, ownedBy("apps/v1", "ReplicaSet", "b-2", false)),
			nil, core.OutcomeAlreadyAttached, "", []types.UID{"b-1-uid", "b-2-uid"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newOwnedWorld(t, tc.cm)
			opts := core.DefaultOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			w.reader.users["ConfigMap/shared"] = &core.Users{ReplicaSets: []*appsv1.ReplicaSet{w.b2}}
			res, err := w.attacher(t).Attach(context.Background(), core.Event{Namespace: "shop", Name: "b-2", UID: w.b2.UID, Options: opts})
			require.NoError(t, err)
			or := resultFor(res, core.KindConfigMap, "shared")
			assert.Equal(t, tc.want, or.Outcome, "%+v", or)
			if tc.reason == "" {
				assert.Empty(t, or.Reason)
			} else {
				assert.Contains(t, or.Reason, tc.reason)
			}
			assert.ElementsMatch(t, tc.owners, w.ownerUIDs(t, "shared"))
		})
	}
}

// An event's names stay untrusted (rule 4): an owned object that the ReplicaSet's
// template does not use is not attached to it because the event names it, and a dry run
// says what a real run would add, with the reason.
func TestOwnedObjectNamedOnlyByTheEventIsNotAttached(t *testing.T) {
	b1 := ownedBy("apps/v1", "ReplicaSet", "b-1", false)
	w := newOwnedWorld(t, cmWith("mounted", nil, nil, b1))
	other := cmWith("victim", nil, nil, b1)
	other.Namespace, other.UID, other.ResourceVersion = "shop", "cm-victim", "1"
	w.reader.meta["ConfigMap/victim"] = &metav1.PartialObjectMetadata{ObjectMeta: other.ObjectMeta}
	require.NoError(t, w.kc.Tracker().Add(other))
	opts := core.DefaultOptions()
	opts.ConfigMaps = []string{"victim"}
	ev := core.Event{Namespace: "shop", Name: "b-2", UID: w.b2.UID, Options: opts}

	dry := ev
	dry.Options.DryRun = true
	res, err := w.attacher(t).Attach(context.Background(), dry)
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeWouldAttach, resultFor(res, core.KindConfigMap, "mounted").Outcome)
	assert.Contains(t, resultFor(res, core.KindConfigMap, "mounted").Reason, "already owned by ReplicaSet b-1")

	res, err = w.attacher(t).Attach(context.Background(), ev)
	require.NoError(t, err)
	victim := resultFor(res, core.KindConfigMap, "victim")
	assert.Equal(t, core.OutcomeSkipped, victim.Outcome, "%+v", victim)
	assert.Contains(t, victim.Reason, "comes only with the event")
	assert.Equal(t, []types.UID{"b-1-uid"}, w.ownerUIDs(t, "victim"))
	assert.Equal(t, core.OutcomeAttached, resultFor(res, core.KindConfigMap, "mounted").Outcome)
}

// Safety rule 11 on the revision side: an owned config object that is neither opted in
// nor listed (the listing workload is gone) is attached to its live users from its own
// event, with the reason; the kube-system default exclusion and Secrets' switch hold.
func TestOnceOwnedTheRevisionSideAttachesEveryUser(t *testing.T) {
	b1 := ownedBy("apps/v1", "ReplicaSet", "b-1", false)
	cases := []struct {
		name   string
		cm     *corev1.ConfigMap
		want   core.Outcome
		reason string
		owners []types.UID
	}{
		{"owned by b-1, used by b-1 and b-2: b-2 attached", cmWith("shared", nil, nil, b1),
			core.OutcomeAttached, "already owned by ReplicaSet b-1", []types.UID{"b-1-uid", "b-2-uid"}},
		{"no owners: skipped (rule 4)", cmWith("shared", nil, nil), core.OutcomeSkipped, "not opted in", nil},
		{"owned and skip=true: skipped", cmWith("shared", nil, map[string]string{core.AnnotationSkip: "true"}, b1),
			core.OutcomeSkipped, "remove its ownerReferences", []types.UID{"b-1-uid"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newOwnedWorld(t, tc.cm)
			res, err := w.attacher(t).AttachRevision(context.Background(),
				core.RevisionEvent{Kind: core.KindConfigMap, Namespace: "shop", Name: "shared", Options: core.DefaultOptions()})
			require.NoError(t, err)
			require.Len(t, res.Objects, 1)
			assert.Equal(t, tc.want, res.Objects[0].Outcome, "%+v", res.Objects[0])
			assert.Contains(t, res.Objects[0].Reason, tc.reason)
			assert.ElementsMatch(t, tc.owners, w.ownerUIDs(t, "shared"))
		})
	}
	t.Run("kube-system stays excluded", func(t *testing.T) {
		w := newOwnedWorld(t, cmWith("shared", nil, nil, b1))
		a, err := core.NewAttacher(core.Config{Client: w.kc, Reader: w.reader, Logger: testfix.Quiet(),
			Namespaces: core.NamespacePolicy{Deny: core.DefaultExcludedNamespaces("configmap-attacher")}})
		require.NoError(t, err)
		_, err = a.AttachRevision(context.Background(), core.RevisionEvent{Kind: core.KindConfigMap, Namespace: "kube-system", Name: "shared", Options: core.DefaultOptions()})
		require.ErrorIs(t, err, core.ErrRefused)
	})
	t.Run("a Secret stays off without --allow-secrets", func(t *testing.T) {
		w := newOwnedWorld(t)
		opts := core.DefaultOptions()
		opts.IncludeSecrets = true
		res, err := w.attacher(t).AttachRevision(context.Background(), core.RevisionEvent{Kind: core.KindSecret, Namespace: "shop", Name: "shared", Options: opts})
		require.NoError(t, err)
		assert.Equal(t, core.OutcomeSkipped, res.Objects[0].Outcome)
		assert.Contains(t, res.Objects[0].Reason, "Secrets are not enabled")
	})
}
