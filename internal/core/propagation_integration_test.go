package core_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// How a ReplicaSet is deleted decides what the real garbage collector does to the
// revisions the core made it own: `kubectl delete --cascade=background|foreground|orphan`,
// and Argo CD prunes and deletes with foreground propagation unless told otherwise
// (PrunePropagationPolicy). A revision only the deleted ReplicaSet used goes with it
// (foreground: before it), except under orphan propagation, where the collector strips
// the reference and the revision stays for the orphaned Pods; a revision a live
// ReplicaSet shares always stays, owned by that one. blockOwnerDeletion (configured)
// changes only the order.
func TestDeletePropagationDecidesWhatTheGarbageCollectorDoesToRevisions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  metav1.DeletionPropagation
		block   bool
		ownGoes bool
	}{
		{"background: its own revision goes, the shared one stays", metav1.DeletePropagationBackground, false, true},
		{"foreground: its own revision goes first, the shared one stays", metav1.DeletePropagationForeground, false, true},
		{"foreground with blockOwnerDeletion: the same, the owner waits for it", metav1.DeletePropagationForeground, true, true},
		{"orphan: both stay, the deleted owner stripped", metav1.DeletePropagationOrphan, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			a := e.attacherWith(core.Config{BlockOwnerDeletion: tc.block})
			ro := e.rollout("web", nil)
			own := rolloutOwner(ro)
			e.revision("web-config-1")
			e.revision("shared-config")
			rs1 := e.replicaSet("web-1", &own, podTemplate("web", "web-config-1", "shared-config"))
			rs2 := e.replicaSet("web-2", &own, podTemplate("web", "shared-config"))
			_, err := a.Attach(ctx, e.event(rs1, core.DefaultOptions()))
			require.NoError(t, err)
			for _, ref := range e.owners(core.KindConfigMap, "shared-config") {
				assert.Equal(t, tc.block, ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion, "%+v", ref)
			}

			require.NoError(t, e.kc.AppsV1().ReplicaSets(e.ns).Delete(ctx, rs1.Name, metav1.DeleteOptions{PropagationPolicy: &tc.policy}))
			e.waitReplicaSetGone(rs1.Name)
			e.waitOwnerDropped("shared-config", rs1.UID)
			assert.Equal(t, []types.UID{rs2.UID}, ownerUIDs(e.owners(core.KindConfigMap, "shared-config")))
			if tc.ownGoes {
				e.waitConfigMapGone("web-config-1")
				return
			}
			e.waitOwnerDropped("web-config-1", rs1.UID)
			assert.Empty(t, e.owners(core.KindConfigMap, "web-config-1"), "orphaned: no owner left, the orphan sweep decides")
		})
	}
}

// Kustomize's generatorOptions.immutable (and `immutable: true` by hand) is common on
// hash-named revisions. Immutability covers data only: the core attaches an immutable
// ConfigMap or Secret (a metadata patch), and the garbage collector deletes it with
// its last owner.
func TestImmutableRevisionsAreAttachedAndCollected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	labels := map[string]string{core.LabelRevision: "true"}
	_, err := e.kc.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config-h4sh", Labels: labels},
		Data: map[string]string{"k": "v"}, Immutable: ptr(true)}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.kc.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-secret-h4sh", Labels: labels},
		StringData: map[string]string{"k": "v"}, Immutable: ptr(true)}, metav1.CreateOptions{})
	require.NoError(t, err)
	tmpl := podTemplate("web", "web-config-h4sh")
	tmpl.Spec.Containers[0].EnvFrom = append(tmpl.Spec.Containers[0].EnvFrom, corev1.EnvFromSource{
		SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-secret-h4sh"}}})
	rs := e.replicaSet("web-1", nil, tmpl)

	opts := core.DefaultOptions()
	opts.IncludeSecrets = true
	res, err := e.attacher.Attach(ctx, e.event(rs, opts))
	require.NoError(t, err)
	assert.Equal(t, map[string]core.Outcome{"ConfigMap/web-config-h4sh": core.OutcomeAttached, "Secret/web-secret-h4sh": core.OutcomeAttached}, outcomes(res))
	assert.Equal(t, []types.UID{rs.UID}, ownerUIDs(e.owners(core.KindConfigMap, "web-config-h4sh")))
	assert.Equal(t, []types.UID{rs.UID}, ownerUIDs(e.owners(core.KindSecret, "web-secret-h4sh")))

	require.NoError(t, e.kc.AppsV1().ReplicaSets(e.ns).Delete(ctx, rs.Name, metav1.DeleteOptions{}))
	e.waitConfigMapGone("web-config-h4sh")
	e.waitSecretGone("web-secret-h4sh")
}

// attacherWith returns an Attacher like e.attacher (live reads through the counted
// clients, Secrets allowed) with cfg's BlockOwnerDeletion.
func (e *env) attacherWith(cfg core.Config) *core.Attacher {
	e.t.Helper()
	clients, err := kube.NewClients(e.counter.Wrap(requireCP(e.t).RESTConfig()))
	require.NoError(e.t, err)
	a, err := core.NewAttacher(core.Config{Cluster: "local", Client: clients.Kube,
		Reader:       core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
		AllowSecrets: true, BlockOwnerDeletion: cfg.BlockOwnerDeletion,
		Logger: testfix.Quiet()})
	require.NoError(e.t, err)
	return a
}

// Where the OwnerReferencesPermissionEnforcement admission plugin is on (OpenShift, many
// hardened clusters), changing an object's ownerReferences needs the right to delete it,
// and an ownerReference with blockOwnerDeletion the right to update the owner's
// finalizers: without either rule of the chart (`delete` on ConfigMaps, which the sweep
// needs too; `replicasets/finalizers` with --block-owner-deletion) the write is a
// permanent Forbidden naming the revision, with nothing written; with them the revision
// is attached.
func TestOwnerReferencePermissionsWhereTheyAreEnforced(t *testing.T) {
	read := rbacv1.PolicyRule{APIGroups: []string{"", "apps", "batch", core.RolloutGroup}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}
	patch := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}
	del := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"delete"}}
	finalizers := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"replicasets/finalizers"}, Verbs: []string{"update"}}
	for i, tc := range []struct {
		name      string
		block     bool
		rules     []rbacv1.PolicyRule
		forbidden string
	}{
		{"no delete right on ConfigMaps: permanent Forbidden", false, []rbacv1.PolicyRule{read, patch}, "can't delete"},
		{"the default with the chart's rules: attached", false, []rbacv1.PolicyRule{read, patch, del}, ""},
		{"blockOwnerDeletion without the finalizers rule: permanent Forbidden", true, []rbacv1.PolicyRule{read, patch, del}, "blockOwnerDeletion"},
		{"blockOwnerDeletion with the finalizers rule: attached", true, []rbacv1.PolicyRule{read, patch, del, finalizers}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			a := e.restrictedAttacherWith(fmt.Sprintf("block-%d", i), tc.rules, core.Config{BlockOwnerDeletion: tc.block})
			e.revision("cfg-1")
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
			_, err := a.Attach(context.Background(), e.event(rs, core.DefaultOptions()))
			if tc.forbidden != "" {
				requirePermanent(t, err, "ConfigMap "+e.ns+"/cfg-1", apierrors.IsForbidden)
				assert.Contains(t, err.Error(), tc.forbidden)
				assert.Empty(t, e.owners(core.KindConfigMap, "cfg-1"))
				return
			}
			require.NoError(t, err)
			refs := e.owners(core.KindConfigMap, "cfg-1")
			require.Equal(t, []types.UID{rs.UID}, ownerUIDs(refs))
			assert.Equal(t, tc.block, refs[0].BlockOwnerDeletion != nil && *refs[0].BlockOwnerDeletion)
		})
	}
}
