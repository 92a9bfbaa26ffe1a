package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// fluxLabels are the labels a Flux Kustomization "apps" in namespace flux-system puts on
// what it applies, plus the opt-in label.
func fluxLabels() map[string]string {
	return map[string]string{core.LabelRevision: "true", core.FluxNameLabel: "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
}

func withLabels(extra map[string]string) map[string]string {
	l := fluxLabels()
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// The prune guard (docs/safety.md, "Flux"): a revision a Flux Kustomization applied gets
// kustomize.toolkit.fluxcd.io/prune: disabled once the service owns it, in a write of its
// own after the owner patch (which stays ownerReferences only), by the service's field
// manager; a revision Flux did not apply, or whose key is already set (any value, label
// or annotation), gets none. A replay writes nothing.
func TestAttachAddsThePruneGuardToFluxRevisionsOnly(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		guard       bool   // the service adds the annotation
		want        string // the annotation's value afterwards
	}{
		{name: "applied by Flux", labels: fluxLabels(), guard: true, want: core.FluxPruneDisabled},
		{name: "not applied by Flux", labels: map[string]string{core.LabelRevision: "true"}},
		{name: "key set by the manifest", labels: fluxLabels(), annotations: map[string]string{core.FluxPruneKey: "enabled"}, want: "enabled"},
		{name: "key set as a label", labels: withLabels(map[string]string{core.FluxPruneKey: core.FluxPruneDisabled})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			cm := e.configMap("cfg-1", tc.labels)
			if tc.annotations != nil {
				cm.Annotations = tc.annotations
				var err error
				cm, err = e.kc.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "manifest"})
				require.NoError(t, err)
			}
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))

			e.counter.Reset()
			res, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err)
			or := resultFor(res, core.KindConfigMap, "cfg-1")
			assert.Equal(t, core.OutcomeAttached, or.Outcome)
			writes := 1
			if tc.guard {
				writes = 2
				assert.Equal(t, []string{core.PruneGuard}, or.Annotations)
			} else {
				assert.Empty(t, or.Annotations)
			}
			assert.Equal(t, writes, e.counter.Writes(), "the owner patch, then the guard in a write of its own")

			got, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "cfg-1", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, []types.UID{rs.UID}, ownerUIDs(got.OwnerReferences))
			assert.Equal(t, tc.want, got.Annotations[core.FluxPruneKey])
			if tc.guard {
				assert.True(t, managesAnnotation(got, core.FieldManager, core.FluxPruneKey), "managed fields: %v", got.ManagedFields)
			}

			e.counter.Reset()
			res, err = e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err)
			assert.Equal(t, core.OutcomeAlreadyAttached, resultFor(res, core.KindConfigMap, "cfg-1").Outcome)
			assert.Zero(t, e.counter.Writes(), "a replay writes nothing")
		})
	}
}

// A revision owned before the service added guards (or whose guard was removed) gets it
// from the next event of either side, as already-attached; a dry run reports it and
// writes nothing.
func TestPruneGuardReachesAnAlreadyAttachedRevision(t *testing.T) {
	for _, side := range []string{"replicaset", "revision"} {
		t.Run(side, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.configMap("cfg-1", fluxLabels())
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
			_, err := e.kc.CoreV1().ConfigMaps(e.ns).Patch(ctx, "cfg-1", types.StrategicMergePatchType,
				[]byte(`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","uid":"`+string(rs.UID)+`"}]}}`),
				metav1.PatchOptions{FieldManager: "older-version"})
			require.NoError(t, err)

			attach := func(dry bool) core.ObjectResult {
				opts := core.DefaultOptions()
				opts.DryRun = dry
				var res core.Result
				var err error
				if side == "replicaset" {
					res, err = e.attacher.Attach(ctx, e.event(rs, opts))
				} else {
					res, err = e.attacher.AttachRevision(ctx, core.RevisionEvent{Kind: core.KindConfigMap, Namespace: e.ns, Name: "cfg-1", Options: opts})
				}
				require.NoError(t, err)
				return resultFor(res, core.KindConfigMap, "cfg-1")
			}
			e.counter.Reset()
			dry := attach(true)
			assert.Equal(t, core.OutcomeAlreadyAttached, dry.Outcome)
			assert.Equal(t, []string{core.PruneGuard}, dry.Annotations)
			assert.Zero(t, e.counter.Writes(), "a dry run writes nothing")

			or := attach(false)
			assert.Equal(t, core.OutcomeAlreadyAttached, or.Outcome)
			assert.Equal(t, []string{core.PruneGuard}, or.Annotations)
			assert.Equal(t, 1, e.counter.Writes(), "the guard alone")
			got, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "cfg-1", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, core.FluxPruneDisabled, got.Annotations[core.FluxPruneKey])
			assert.Equal(t, []types.UID{rs.UID}, ownerUIDs(got.OwnerReferences))
		})
	}
}

// A guard decided on a stale read (the key set by someone else since) meets a conflict,
// re-reads, and leaves the other writer's value: never overwritten (safety rule 6).
func TestPruneGuardNeverOverwritesAKeySetMeanwhile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	stale := e.configMap("cfg-1", fluxLabels())
	rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
	owned, err := e.kc.CoreV1().ConfigMaps(e.ns).Update(ctx, withOwner(stale, rs), metav1.UpdateOptions{})
	require.NoError(t, err)
	staleMeta := &metav1.PartialObjectMetadata{ObjectMeta: *owned.ObjectMeta.DeepCopy()} // owned, the key not yet set
	cur, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "cfg-1", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Annotations = map[string]string{core.FluxPruneKey: "enabled"}
	_, err = e.kc.CoreV1().ConfigMaps(e.ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "someone"})
	require.NoError(t, err)

	a, err := core.NewAttacher(core.Config{Cluster: "local", Client: e.kc, Logger: testfix.Quiet(),
		Reader: mapReader{rs: map[string]*appsv1.ReplicaSet{rs.Name: rs}, meta: map[string]*metav1.PartialObjectMetadata{"ConfigMap/cfg-1": staleMeta}}})
	require.NoError(t, err)
	res, err := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	or := resultFor(res, core.KindConfigMap, "cfg-1")
	assert.Equal(t, core.OutcomeAlreadyAttached, or.Outcome)
	assert.Empty(t, or.Annotations)
	got, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "cfg-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "enabled", got.Annotations[core.FluxPruneKey])
}

func withOwner(cm *corev1.ConfigMap, rs *appsv1.ReplicaSet) *corev1.ConfigMap {
	out := cm.DeepCopy()
	out.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}}
	return out
}

// managesAnnotation reports whether manager's managedFields entry holds annotation key.
func managesAnnotation(cm *corev1.ConfigMap, manager, key string) bool {
	for _, mf := range cm.ManagedFields {
		if mf.Manager == manager && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:`+key+`"`) {
			return true
		}
	}
	return false
}
