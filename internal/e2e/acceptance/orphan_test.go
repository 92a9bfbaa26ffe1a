package acceptance_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Scenario 8. A ReplicaSet deleted with `kubectl delete --cascade=orphan` (Argo CD's
// PrunePropagationPolicy=orphan does the same to what it prunes): the garbage collector
// strips that ReplicaSet's ownerReference from every dependent, the revision included,
// and its Pods run on without a controller. The revision must survive while they run,
// never be given the dead ReplicaSet back as an owner, and end owned by the ReplicaSet
// the Deployment controller makes again for the same template (which adopts the Pods);
// the next rollout then collects it as usual.
func TestOrphanDeletedReplicaSetKeepsItsRevisionForItsPods(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	v1 := app{name: "api", replicas: 2, configMap: "api-config-1", version: "1"}
	w.revision(v1.configMap)
	w.createDeployment(v1.name, v1, v1.replicas, ptr(int32(0)))
	rs1 := w.waitDeploymentComplete(v1)
	pods := w.podsReady(rs1, v1, int(v1.replicas))
	w.waitOwned("ConfigMap", v1.configMap, rs1)

	orphan := metav1.DeletePropagationOrphan
	if err := w.Kube.AppsV1().ReplicaSets(w.NS).Delete(w.Ctx, rs1.Name, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatalf("delete ReplicaSet %s: %v", rs1.Name, err)
	}
	// The Deployment controller makes the ReplicaSet again under the same name (the
	// template's hash) as soon as the old one is gone: wait for the UID to go.
	w.WaitGone("ReplicaSet "+rs1.Name+" of UID "+string(rs1.UID), func() error {
		got, err := w.getErr(rs1)
		if err == nil && got.UID != rs1.UID {
			return apierrors.NewNotFound(appsv1.Resource("replicasets"), rs1.Name)
		}
		return err
	})
	rs2 := w.waitDeploymentComplete(v1)
	w.Eventually("the orphaned Pods adopted, the revision owned by the new ReplicaSet only among ReplicaSets", func() error {
		for _, p := range pods {
			got, err := w.Kube.CoreV1().Pods(w.NS).Get(w.Ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("orphaned Pod %s: %w", p.Name, err)
			}
			if !metav1.IsControlledBy(got, rs2) {
				return fmt.Errorf("Pod %s controlled by %v", p.Name, metav1.GetControllerOf(got))
			}
		}
		return w.ownedByReplicaSets(v1.configMap, rs2.UID)
	})
	w.waitOwned("ConfigMap", v1.configMap, rs2)
	if _, gone := w.events.deletedAt("ConfigMap", v1.configMap); gone {
		t.Fatalf("revision %s was deleted while the orphaned Pods used it", v1.configMap)
	}

	v2 := v1.with("api-config-2", "2")
	w.revision(v2.configMap)
	w.updateDeployment(v1.name, v2)
	w.waitDeploymentComplete(v2)
	w.WaitGone("ReplicaSet "+rs2.Name, func() error { _, err := w.getErr(rs2); return err })
	w.waitConfigMapGone(v1.configMap)
	w.lag("ReplicaSet", rs2.Name, "ConfigMap", v1.configMap)
}

// ownedByReplicaSets checks that the ConfigMap's ReplicaSet owners are exactly uids
// (owners of other kinds, such as the Pods it protected meanwhile, are not counted).
func (w *world) ownedByReplicaSets(name string, uids ...types.UID) error {
	var got []types.UID
	for _, o := range w.mustExist(name).OwnerReferences {
		if o.Kind == "ReplicaSet" {
			got = append(got, o.UID)
		}
	}
	slices.Sort(got)
	slices.Sort(uids)
	if !slices.Equal(got, uids) {
		return fmt.Errorf("ConfigMap %s has ReplicaSet owners %v, want %v", name, got, uids)
	}
	return nil
}
