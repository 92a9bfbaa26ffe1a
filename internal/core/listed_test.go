package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// rolloutState is what the Rollout controller has done: the generation it observed,
// the pod hash it reports, and its ReplicaSets (hash -> the ConfigMap the template mounts
// and the creation time).
type rolloutState struct {
	generation, observed int64
	hash                 string
	annotations          map[string]string
	specMounts           string // the ConfigMap the Rollout's spec.template mounts, if any
	missing              bool   // no Rollout at all
	replicaSets          map[string]rsState
	configMaps           map[string]time.Time // name -> creation time
}

type rsState struct {
	mounts  string
	created time.Time
}

func (s rolloutState) wait() (core.ListedOwnerWait, func(hash string) types.UID) {
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "app", "namespace": "shop", "uid": "ro-uid", "generation": s.generation},
		"status":   map[string]any{"observedGeneration": strconv.FormatInt(s.observed, 10), "currentPodHash": s.hash},
	}}
	ro.SetAnnotations(s.annotations)
	if s.specMounts != "" {
		tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr(podTemplate("app", s.specMounts)))
		if err != nil {
			panic(err)
		}
		ro.Object["spec"] = map[string]any{"template": tmpl}
	}
	var objs []runtime.Object
	for hash, rs := range s.replicaSets {
		tmpl := podTemplate("app", rs.mounts)
		tmpl.Labels[core.RolloutHashLabel] = hash
		objs = append(objs, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "app-" + hash, Namespace: "shop", UID: types.UID("rs-" + hash),
			Labels: tmpl.Labels, CreationTimestamp: metav1.NewTime(rs.created),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "app", UID: "ro-uid", Controller: ptr(true)}}},
			Spec: appsv1.ReplicaSetSpec{Template: tmpl}})
	}
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		panic(err)
	}
	var metas []runtime.Object
	for name, created := range s.configMaps {
		metas = append(metas, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", CreationTimestamp: metav1.NewTime(created)}})
	}
	var rollouts []runtime.Object
	if !s.missing {
		rollouts = append(rollouts, ro)
	}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"}, rollouts...)
	return core.ListedOwnerWait{Client: fake.NewClientset(objs...), Dynamic: dc, Metadata: metadatafake.NewSimpleMetadataClient(scheme, metas...),
		Interval: 10 * time.Millisecond, Now: func() time.Time { return t0.Add(30 * time.Second) }}, func(hash string) types.UID { return types.UID("rs-" + hash) }
}

// Rule 10 for Rollouts (the Rollouts-controller proof runs once the real controller is
// part of the local control plane): the same logic as for Deployments, unit-tested on
// the states the controller goes through.
func TestListedOwnerWaitRollout(t *testing.T) {
	old := map[string]rsState{"5b6d": {mounts: "app-config-1", created: t0}}
	both := map[string]rsState{"5b6d": {mounts: "app-config-1", created: t0}, "7f9c": {mounts: "app-config-2", created: t0.Add(20 * time.Second)}}
	cms := map[string]time.Time{"app-config-1": t0.Add(-time.Minute), "app-config-2": t0.Add(10 * time.Second), "runtime": t0.Add(-time.Minute)}
	cases := []struct {
		name     string
		state    rolloutState
		listed   []string
		wantHash string // empty: still waiting at the deadline
		wantWhy  string // in the timeout error, or in the fallback note
		// later is how long after t0+30s the command runs; never: it fails at once
		// (ErrWaitCannotHelp), without waiting or progress.
		later time.Duration
		never bool
	}{
		{name: "the new spec is not applied: the old ReplicaSet is never taken",
			state:  rolloutState{generation: 1, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms},
			listed: []string{"app-config-2"}, wantWhy: "newer"},
		{name: "applied, not yet observed by the controller",
			state:  rolloutState{generation: 2, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms},
			listed: []string{"app-config-2"}, wantWhy: "observedGeneration"},
		{name: "observed: the new ReplicaSet, which mounts it",
			state:  rolloutState{generation: 2, observed: 2, hash: "7f9c", replicaSets: both, configMaps: cms},
			listed: []string{"app-config-2"}, wantHash: "7f9c"},
		{name: "a listed ConfigMap that does not exist yet is waited for",
			state:  rolloutState{generation: 2, observed: 2, hash: "7f9c", replicaSets: both, configMaps: cms},
			listed: []string{"app-config-2", "app-config-3"}, wantWhy: "does not exist yet"},
		{name: "a name no template uses, older than the current ReplicaSet: the current one, said",
			state:  rolloutState{generation: 1, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms},
			listed: []string{"runtime"}, wantHash: "5b6d", wantWhy: "as the old Job did"},
		{name: "a newer name no template uses, created within Settle: the spec may still come",
			state:  rolloutState{generation: 1, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms},
			listed: []string{"app-config-2"}, later: core.DefaultSettle - 31*time.Second, wantWhy: "waiting for the workload's new spec"},
		{name: "a newer name no template uses, created longer than Settle ago: nothing will change",
			state:  rolloutState{generation: 1, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms},
			listed: []string{"app-config-2"}, later: core.DefaultSettle, never: true, wantWhy: "neither that ReplicaSet, the Rollout's spec nor an annotation uses it"},
		{name: "one listed name that can never belong fails at once, whatever the others wait for",
			state:  rolloutState{generation: 1, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms},
			listed: []string{"app-config-3", "app-config-2"}, later: time.Hour, never: true, wantWhy: "app-config-2"},
		{name: "the Rollout's spec uses it, its ReplicaSet is not there yet (workloadRef): waited for, however old",
			state:  rolloutState{generation: 1, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms, specMounts: "app-config-2"},
			listed: []string{"app-config-2"}, later: time.Hour, wantWhy: "the Rollout's spec uses ConfigMap app-config-2"},
		{name: "a Rollout that does not exist fails at once",
			state:  rolloutState{missing: true, configMaps: cms},
			listed: []string{"app-config-2"}, never: true, wantWhy: "not found"},
		{name: "a name the Rollout's annotation lists counts as used",
			state: rolloutState{generation: 1, observed: 1, hash: "5b6d", replicaSets: old, configMaps: cms,
				annotations: map[string]string{core.AnnotationConfigMaps: "app-config-2"}},
			listed: []string{"app-config-2"}, wantHash: "5b6d"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, uid := tc.state.wait()
			w.Now = func() time.Time { return t0.Add(30*time.Second + tc.later) }
			var progress []string
			w.ProgressEvery, w.Progress = 20*time.Millisecond, func(m string) { progress = append(progress, m) }
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			var listed []core.Ref
			for _, n := range tc.listed {
				listed = append(listed, core.Ref{Kind: core.KindConfigMap, Name: n})
			}
			rs, note, err := w.ReplicaSetFor(ctx, core.RolloutKind, "shop", "app", listed)
			if tc.never {
				require.ErrorIs(t, err, core.ErrWaitCannotHelp)
				assert.NotErrorIs(t, err, core.ErrNotReady)
				assert.Contains(t, err.Error(), tc.wantWhy)
				assert.NoError(t, ctx.Err(), "failed before the deadline")
				assert.Empty(t, progress, "no wait")
				return
			}
			if tc.wantHash == "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, core.ErrNotReady)
				assert.Contains(t, err.Error(), tc.wantWhy)
				require.NotEmpty(t, progress, "progress is reported while waiting")
				assert.Contains(t, progress[len(progress)-1], tc.wantWhy)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, uid(tc.wantHash), rs.UID)
			assert.Contains(t, note, tc.wantWhy)
		})
	}
}
