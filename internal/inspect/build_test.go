package inspect_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// build plans snap as the sweep would (every workload kind listed, every workload live)
// and builds its status.
func build(t *testing.T, snap *gc.Snapshot, others []gc.Revision, secrets bool) inspect.Report {
	t.Helper()
	snap.Listed, snap.Live = map[schema.GroupKind]bool{}, map[types.UID]bool{}
	for _, gk := range gc.WorkloadKinds {
		snap.Listed[gk] = true
	}
	for _, w := range snap.Workloads {
		snap.Live[w.UID] = true
	}
	plan, err := gc.PlanNamespace(snap, gc.Options{MinAge: time.Hour, Now: now})
	require.NoError(t, err)
	return inspect.Build(snap, plan, others, secrets)
}

func cm(name string) core.Ref { return core.Ref{Kind: core.KindConfigMap, Name: name} }

func owner(kind, name string, uid types.UID, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &controller}
}

func revision(name string, uid types.UID, created time.Time, owners ...metav1.OwnerReference) gc.Revision {
	return gc.Revision{Kind: core.KindConfigMap, Name: name, UID: uid, Created: created,
		Labels: map[string]string{core.LabelRevision: "true"}, OwnerReferences: owners}
}

func names(ws []inspect.WorkloadStatus) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Kind+"/"+w.Name)
	}
	return out
}

// refs are the revisions' "Kind/name".
func refs(rs []inspect.RevisionRef) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Kind)+"/"+r.Name)
	}
	return out
}

// A Rollout's ReplicaSets are grouped under it, newest revision first, each with what it
// owns and what it uses unattached; workloads without ReplicaSets list what they use;
// the plan's unattached and orphaned revisions are listed apart.
func TestBuildGroupsReplicaSetsUnderTheirWorkloadNewestFirst(t *testing.T) {
	ro := owner(core.RolloutKind, "web", "ro", true)
	rep := build(t, &gc.Snapshot{Namespace: "shop",
		Workloads: []gc.Workload{
			{APIVersion: "argoproj.io/v1alpha1", Kind: core.RolloutKind, Name: "web", UID: "ro"},
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1111", UID: "rs1", Revision: "1", Created: now.Add(-2 * time.Hour),
				OwnerReferences: []metav1.OwnerReference{ro}, Refs: []core.Ref{cm("cfg-a")}},
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-2222", UID: "rs2", Revision: "2", Created: now.Add(-time.Hour),
				OwnerReferences: []metav1.OwnerReference{ro}, Refs: []core.Ref{cm("cfg-b"), cm("flags-a")}},
			{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "cj", Refs: []core.Ref{cm("nightly-1")}},
		},
		Revisions: []gc.Revision{
			revision("cfg-a", "a", now.Add(-3*time.Hour), owner("ReplicaSet", "web-1111", "rs1", false)),
			revision("cfg-b", "b", now.Add(-time.Hour), owner("ReplicaSet", "web-2222", "rs2", false)),
			revision("flags-a", "f", now.Add(-time.Hour)),
			revision("nightly-1", "n", now.Add(-time.Hour)),
			revision("old-1", "o", now.Add(-48*time.Hour)),
		}}, nil, false)

	assert.Equal(t, []string{"CronJob/nightly", "Rollout/web"}, names(rep.Workloads))
	assert.Equal(t, []string{"ConfigMap/nightly-1"}, refs(rep.Workloads[0].Uses))
	web := rep.Workloads[1]
	require.Len(t, web.ReplicaSets, 2)
	assert.Equal(t, "web-2222", web.ReplicaSets[0].Name, "newest revision first")
	assert.Equal(t, []string{"ConfigMap/cfg-b"}, refs(web.ReplicaSets[0].Owns))
	assert.Equal(t, []string{"ConfigMap/flags-a"}, refs(web.ReplicaSets[0].Unattached))
	assert.Equal(t, "web-1111", web.ReplicaSets[1].Name)
	assert.Equal(t, []string{"ConfigMap/cfg-a"}, refs(web.ReplicaSets[1].Owns))
	var unattached, orphaned []string
	for _, it := range rep.Unattached {
		unattached = append(unattached, it.Name)
	}
	for _, it := range rep.Orphaned {
		orphaned = append(orphaned, it.Name)
	}
	assert.ElementsMatch(t, []string{"flags-a", "nightly-1"}, unattached)
	assert.Equal(t, []string{"old-1"}, orphaned)
	assert.Equal(t, gc.Delete, rep.Orphaned[0].Decision)
}

// The Pods of a ReplicaSet are folded under it; a bare Pod is a workload of its own.
func TestBuildFoldsPodsUnderTheirReplicaSet(t *testing.T) {
	ref := []core.Ref{cm("cfg")}
	rs := owner("ReplicaSet", "web-1", "rs", true)
	rep := build(t, &gc.Snapshot{Namespace: "shop",
		Workloads: []gc.Workload{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Replicas: 2, ReadyReplicas: 2, Created: now, Refs: ref},
			{APIVersion: "v1", Kind: "Pod", Name: "web-1-a", UID: "p1", Refs: ref, OwnerReferences: []metav1.OwnerReference{rs}},
			{APIVersion: "v1", Kind: "Pod", Name: "debug", UID: "bare", Refs: ref},
		},
		Revisions: []gc.Revision{revision("cfg", "c", now, owner("ReplicaSet", "web-1", "rs", false))}}, []gc.Revision{}, false)
	assert.Equal(t, []string{"Pod/debug", "ReplicaSet/web-1"}, names(rep.Workloads))
	assert.Len(t, rep.Workloads[1].ReplicaSets, 1)
}

// What a team with existing config meets first: a reference without the opt-in label
// is reported with the exact fix, a required reference to nothing is MISSING, and
// nothing is said of optional references, of the root CA, of Secrets not listed, of an
// object listed by name, or when the other objects are unknown (others nil).
func TestBuildShowsAdoptionHints(t *testing.T) {
	refs := []core.Ref{cm("plain"), cm("gone"), {Kind: core.KindConfigMap, Name: "maybe", Optional: true}, cm("kube-root-ca.crt"),
		{Kind: core.KindSecret, Name: "creds"}, {Kind: core.KindConfigMap, Name: "listed", Explicit: true}}
	snap := func() *gc.Snapshot {
		return &gc.Snapshot{Namespace: "shop", Workloads: []gc.Workload{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Created: now, Refs: refs}}}
	}
	others := []gc.Revision{{Kind: core.KindConfigMap, Name: "plain", UID: "p"}, {Kind: core.KindConfigMap, Name: "listed", UID: "l"}}
	for _, tc := range []struct {
		name           string
		others         []gc.Revision
		wantNotOptedIn []string
		wantDangling   []string
		wantFix        bool
	}{
		{name: "others known", others: others, wantNotOptedIn: []string{"plain"}, wantDangling: []string{"gone"}, wantFix: true},
		{name: "others unknown: nothing said", others: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := build(t, snap(), tc.others, false)
			require.Len(t, rep.Workloads, 1)
			w := rep.Workloads[0]
			var notOptedIn, dangling []string
			for _, r := range w.NotOptedIn {
				notOptedIn = append(notOptedIn, r.Name)
				assert.Equal(t, []string{"ReplicaSet/web-1"}, r.UsedBy)
			}
			for _, r := range w.Dangling {
				dangling = append(dangling, r.Name)
			}
			assert.Equal(t, tc.wantNotOptedIn, notOptedIn)
			assert.Equal(t, tc.wantDangling, dangling)
			if !tc.wantFix {
				assert.Nil(t, rep.OptIn)
				return
			}
			require.NotNil(t, rep.OptIn)
			assert.Equal(t, []string{"kubectl label configmap -n shop plain " + core.LabelRevision + "=true"}, rep.OptIn.Kubectl)
		})
	}
}

// An unlabelled object a ReplicaSet owns (attached by name) is shown as owned by name;
// another ReplicaSet using it without owning it shows it unattached, by name; no fix
// is offered for it.
func TestBuildShowsObjectsOwnedByName(t *testing.T) {
	ref := []core.Ref{cm("shared")}
	rep := build(t, &gc.Snapshot{Namespace: "shop", Workloads: []gc.Workload{
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "b-1", UID: "b1", Created: now, Refs: ref},
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "b-2", UID: "b2", Created: now, Refs: ref},
	}}, []gc.Revision{{Kind: core.KindConfigMap, Name: "shared", UID: "s", Created: now,
		OwnerReferences: []metav1.OwnerReference{owner("ReplicaSet", "b-1", "b1", false)}}}, false)
	byName := []inspect.RevisionRef{{Kind: core.KindConfigMap, Name: "shared", ByName: true}}
	assert.Equal(t, []string{"ReplicaSet/b-1", "ReplicaSet/b-2"}, names(rep.Workloads))
	assert.Equal(t, byName, rep.Workloads[0].ReplicaSets[0].Owns)
	assert.Equal(t, byName, rep.Workloads[1].ReplicaSets[0].Unattached)
	assert.Nil(t, rep.OptIn)
}

// The opt-in fix names each kind's objects in one kubectl command, in name order.
func TestNewOptInFixGroupsNamesByKind(t *testing.T) {
	fix := inspect.NewOptInFix("shop", []string{"Secret/s", "ConfigMap/b", "ConfigMap/a"})
	assert.Equal(t, []string{
		"kubectl label configmap -n shop a b " + core.LabelRevision + "=true",
		"kubectl label secret -n shop s " + core.LabelRevision + "=true",
	}, fix.Kubectl)
	assert.Contains(t, fix.Kustomize, "generatorOptions:")
	assert.Contains(t, fix.Helm, core.LabelRevision+`: "true"`)
}

// The Helm fix is the README's whole fix: the opt-in label, and the annotation that keeps
// `helm upgrade` from deleting the revision a rollback returns to.
func TestOptInFixForHelmKeepsTheRevisionOnUpgrade(t *testing.T) {
	fix := inspect.NewOptInFix("shop", []string{"ConfigMap/a"})
	assert.Equal(t, "metadata:\n  labels:\n    "+core.LabelRevision+": \"true\"\n  annotations:\n    helm.sh/resource-policy: keep", fix.Helm)
}
