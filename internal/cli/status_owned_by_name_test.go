package cli_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
)

// An unlabelled object owned by name (a listing attached it) and shared with a
// ReplicaSet that does not own it is shown under that ReplicaSet as used, NOT attached:
// the garbage collector deletes it with its owners (safety rule 11 attaches it).
func TestStatusShowsAnObjectOwnedByNameThatAnotherReplicaSetUsesUnattached(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ref := []core.Ref{{Kind: core.KindConfigMap, Name: "shared"}}
	snap := &gc.Snapshot{Namespace: "shop", Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{"b1": true, "b2": true},
		Workloads: []gc.Workload{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "b-1", UID: "b1", Created: now, Refs: ref},
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "b-2", UID: "b2", Created: now, Refs: ref},
		}}
	for _, gk := range gc.WorkloadKinds {
		snap.Listed[gk] = true
	}
	plan, err := gc.PlanNamespace(snap, gc.Options{MinAge: time.Hour, Now: now})
	require.NoError(t, err)
	others := []gc.Revision{{Kind: core.KindConfigMap, Name: "shared", UID: "s", Created: now,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "b-1", UID: "b1"}}}}
	st := inspect.Build(snap, plan, others, false)
	var buf bytes.Buffer
	cli.RenderStatus(&buf, st, now)
	out := buf.String()
	assert.Contains(t, out, "ReplicaSet b-1  ready:0/0  age:0s\n    └── ConfigMap shared  owned, by name", out)
	assert.Contains(t, out, "ReplicaSet b-2  ready:0/0  age:0s\n    └── ConfigMap shared  used, NOT attached, owned by name by others", out)
	assert.Nil(t, st.OptIn, "an object owned by name needs no opt-in fix")
}
