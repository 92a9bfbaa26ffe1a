package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// staleReader is an informer-like core.Reader that serves ConfigMap/Secret metadata
// from a snapshot taken earlier (a lagging cache), everything else live. Long-running
// paths use an informer-backed Reader (internal/cache), so this lag is the normal case.
type staleReader struct {
	core.Reader
	meta map[string]*metav1.PartialObjectMetadata
	rs   map[string]*appsv1.ReplicaSet
}

func (s *staleReader) ObjectMeta(ctx context.Context, kind core.Kind, ns, name string) (*metav1.PartialObjectMetadata, error) {
	if m, ok := s.meta[string(kind)+"/"+name]; ok {
		return m.DeepCopy(), nil
	}
	return s.Reader.ObjectMeta(ctx, kind, ns, name)
}

func (s *staleReader) ReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	if rs, ok := s.rs[name]; ok {
		return rs.DeepCopy(), nil
	}
	return s.Reader.ReplicaSet(ctx, ns, name)
}

// staleAttacher builds an Attacher over a staleReader whose snapshot is filled by the test.
func (e *env) staleAttacher() (*core.Attacher, *staleReader) {
	e.t.Helper()
	c := requireCP(e.t)
	clients, err := kube.NewClients(c.RESTConfig())
	require.NoError(e.t, err)
	sr := &staleReader{
		Reader: core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
		meta:   map[string]*metav1.PartialObjectMetadata{},
		rs:     map[string]*appsv1.ReplicaSet{},
	}
	a, err := core.NewAttacher(core.Config{Cluster: "local", Client: clients.Kube, Reader: sr, AllowSecrets: true,
		Logger: testfix.Quiet()})
	require.NoError(e.t, err)
	return a, sr
}

func (e *env) snapshotMeta(sr *staleReader, cm *corev1.ConfigMap) {
	sr.meta[string(core.KindConfigMap)+"/"+cm.Name] = &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: *cm.ObjectMeta.DeepCopy(),
	}
}

// Rule 4 under cache lag: the cache still shows the opt-in label (or no skip
// annotation), but the live object has since opted out. The write carries only the UID
// precondition, not the resourceVersion, so the opted-out object is written anyway.
func TestStaleCacheOptOutIsNotWritten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		optOut func(cm *corev1.ConfigMap)
	}{
		{"opt-in label removed", func(cm *corev1.ConfigMap) { delete(cm.Labels, core.LabelRevision) }},
		{"skip annotation added", func(cm *corev1.ConfigMap) {
			cm.Annotations = map[string]string{core.AnnotationSkip: "true"}
		}},
		{"label set to false", func(cm *corev1.ConfigMap) { cm.Labels[core.LabelRevision] = "false" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			a, sr := e.staleAttacher()
			cm := e.revision("cfg-1")
			e.snapshotMeta(sr, cm) // the cache saw it opted in
			tc.optOut(cm)
			_, err := e.kc.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{})
			require.NoError(t, err)
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))

			res, err := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err)
			assert.Empty(t, e.owners(core.KindConfigMap, "cfg-1"),
				"rule 4: the live object is not opted in, yet it was written; result: %+v", res.Objects)
		})
	}
}

// Rules 1 and 4: the ConfigMap was deleted and recreated with the same name, without
// the opt-in label, between the (cached) read and the write. Nothing may be written to
// the namesake. (Holds: the stale UID in the patch makes the apiserver reject it.)
func TestConfigMapRecreatedIsNotWrittenOnStaleState(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, sr := e.staleAttacher()
	old := e.revision("cfg-1")
	e.snapshotMeta(sr, old)
	require.NoError(t, e.kc.CoreV1().ConfigMaps(e.ns).Delete(ctx, "cfg-1", metav1.DeleteOptions{}))
	e.configMap("cfg-1", nil) // namesake, not opted in
	rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))

	res, _ := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
	assert.NotEqual(t, core.OutcomeAttached, outcomes(res)["ConfigMap/cfg-1"], "%+v", res.Objects)
	assert.Empty(t, e.owners(core.KindConfigMap, "cfg-1"))
}

// The write's "UID precondition" is documented (attach.go ownerPatch/write) to answer
// 409 Conflict so that the attacher re-reads the object live and re-evaluates it. The
// apiserver actually answers 422 Invalid ("metadata.uid: field is immutable"), so a
// ConfigMap replaced by a namesake (kubectl replace --force, Helm reinstall, Argo CD
// Replace=true) while the informer lags makes the event fail with a permanent,
// misleading error instead of skipping the unlabelled namesake / attaching the
// labelled one.
func TestConfigMapRecreatedIsReevaluated(t *testing.T) {
	for _, tc := range []struct {
		name     string
		labelled bool
		want     core.Outcome
	}{
		{"namesake not opted in is skipped", false, core.OutcomeSkipped},
		{"opted-in namesake is attached", true, core.OutcomeAttached},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			a, sr := e.staleAttacher()
			old := e.revision("cfg-1")
			e.snapshotMeta(sr, old)
			require.NoError(t, e.kc.CoreV1().ConfigMaps(e.ns).Delete(ctx, "cfg-1", metav1.DeleteOptions{}))
			if tc.labelled {
				e.revision("cfg-1")
			} else {
				e.configMap("cfg-1", nil)
			}
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
			res, err := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err, "%+v", res.Objects)
			assert.Equal(t, tc.want, outcomes(res)["ConfigMap/cfg-1"], "%+v", res.Objects)
		})
	}
}

// Rules 1 and 2: the ReplicaSet was deleted and recreated with the same name; a stale
// cache still serves the old one. The old UID (a dead owner) is never written: an event
// naming it is refused; an event naming no UID gets the live ReplicaSet, planned again
// for it and confirmed.
func TestReplicaSetRecreatedNeverGetsTheDeadOwner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		eventUID func(old, cur *appsv1.ReplicaSet) types.UID
		live     bool // the live ReplicaSet is the one owner afterwards; false: no owner
		refuse   bool
	}{
		{"old-uid-in-event", func(old, _ *appsv1.ReplicaSet) types.UID { return old.UID }, false, true},
		{"no-uid-stale-cache", func(*appsv1.ReplicaSet, *appsv1.ReplicaSet) types.UID { return "" }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			a, sr := e.staleAttacher()
			e.revision("cfg-1")
			old := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
			sr.rs["web-1"] = old
			require.NoError(t, e.kc.AppsV1().ReplicaSets(e.ns).Delete(ctx, "web-1", metav1.DeleteOptions{}))
			cur := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
			res, err := a.Attach(ctx, core.Event{Namespace: e.ns, Name: "web-1", UID: tc.eventUID(old, cur), Options: core.DefaultOptions()})
			if tc.refuse {
				require.ErrorIs(t, err, core.ErrRefused, "%+v", res)
			} else {
				require.NoError(t, err, "%+v", res)
			}
			owners := e.owners(core.KindConfigMap, "cfg-1")
			for _, r := range owners {
				assert.NotEqual(t, old.UID, r.UID, "rule 2: attached to the dead ReplicaSet")
			}
			if tc.live {
				require.Len(t, owners, 1)
				assert.Equal(t, cur.UID, owners[0].UID)
			} else {
				assert.Empty(t, owners)
			}
		})
	}
}

// Rule 2: a ReplicaSet with a deletionTimestamp (held by a finalizer) is refused.
func TestTerminatingReplicaSetIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.revision("cfg-1")
	rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"), func(rs *appsv1.ReplicaSet) {
		rs.Finalizers = []string{"example.com/hold"}
	})
	t.Cleanup(func() {
		_, _ = e.kc.AppsV1().ReplicaSets(e.ns).Patch(context.Background(), "web-1", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	require.NoError(t, e.kc.AppsV1().ReplicaSets(e.ns).Delete(ctx, "web-1", metav1.DeleteOptions{}))
	for _, dry := range []bool{false, true} {
		o := core.DefaultOptions()
		o.DryRun = dry
		_, err := e.attacher.Attach(ctx, e.event(rs, o))
		require.ErrorIs(t, err, core.ErrRefused, "dryRun=%v", dry)
	}
	assert.Empty(t, e.owners(core.KindConfigMap, "cfg-1"))
}

// Rule 3: existing owners (none, one controller, many of mixed kinds) survive untouched,
// in order and byte for byte.
func TestOtherOwnersArePreserved(t *testing.T) {
	mk := func(n int) []metav1.OwnerReference {
		var out []metav1.OwnerReference
		for i := 0; i < n; i++ {
			out = append(out, metav1.OwnerReference{APIVersion: "example.com/v1", Kind: fmt.Sprintf("Thing%d", i%3),
				Name: fmt.Sprintf("owner-%d", i), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
				Controller: ptr(i == 0), BlockOwnerDeletion: ptr(i%2 == 0)})
		}
		return out
	}
	for _, n := range []int{0, 1, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			others := mk(n)
			e.configMap("cfg-1", map[string]string{core.LabelRevision: "true"}, others...)
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
			_, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err)
			got := e.owners(core.KindConfigMap, "cfg-1")
			require.Len(t, got, n+1)
			var rest []metav1.OwnerReference
			found := false
			for _, r := range got {
				if r.UID == rs.UID {
					found = true
					continue
				}
				rest = append(rest, r)
			}
			assert.True(t, found)
			assert.ElementsMatch(t, others, rest, "rule 3: another owner was removed or rewritten")
		})
	}
}

// Rule 8 / robustness: an annotation listing 10,000 names (and junk) neither hangs nor
// fails the event; at most MaxListedNames are considered and the rest are reported.
func TestHugeAnnotationListIsBounded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.revision("cfg-1")
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	names[3] = "Ünïcode"
	names[4] = "UPPER"
	names[5] = "other-ns/cfg-1"
	rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"), func(rs *appsv1.ReplicaSet) {
		rs.Annotations = map[string]string{core.AnnotationConfigMaps: strings.Join(names, ",")}
	})
	res, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeAttached, outcomes(res)["ConfigMap/cfg-1"])
	assert.LessOrEqual(t, len(res.Objects), core.MaxListedNames+5)
	limit := false
	for _, o := range res.Objects {
		if strings.Contains(o.Reason, "more than") {
			limit = true
		}
		if o.Name != "cfg-1" {
			assert.NotEqual(t, core.OutcomeAttached, o.Outcome, "only cfg-1 exists: %+v", o)
		}
	}
	assert.True(t, limit, "the cut-off must be reported")
}

// Rule 4 vs the trigger spec key "selector": a selector that does not require the
// opt-in label lets discovery attach ConfigMaps that never opted in (for example the
// namespace's kube-root-ca.crt, once a pod template mounts it). Safety rule 4 (docs/design.md) says
// objects without the opt-in label (or explicit listing) are never touched.
func TestSelectorNeverWidensTheOptIn(t *testing.T) {
	for i, sel := range []string{"!nothing", "app", "x notin (y)"} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.configMap("plain", map[string]string{"app": "web"}) // no opt-in label
			rs := e.replicaSet("web-1", nil, podTemplate("web", "plain"))
			o, err := core.ParseSpec(map[string]string{core.SpecSelector: sel})
			require.NoError(t, err)
			res, err := e.attacher.Attach(ctx, e.event(rs, o))
			require.NoError(t, err)
			assert.Empty(t, e.owners(core.KindConfigMap, "plain"), "rule 4: %+v", res.Objects)
		})
	}
}
