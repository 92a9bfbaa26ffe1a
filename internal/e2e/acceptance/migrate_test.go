package acceptance_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scenario 9. A Deployment migrated to a Rollout of the same template, in the order
// that keeps the config (docs/design.md, "GitOps with Argo CD": a kind change or a
// rename prunes last): the Rollout is created, its ReplicaSet owns the revision beside
// the Deployment's, and only then is the Deployment deleted (foreground, as Argo CD
// prunes). The garbage collector deletes the Deployment's ReplicaSet and drops it from
// the revision's owners, and the revision stays with the Rollout's ReplicaSet.
//
// Deleting the Deployment at the moment the Rollout is created loses the revision: the
// collector deletes it with the Deployment's ReplicaSet before the Rollout's ReplicaSet
// exists, and the Rollout's first Pods are created referencing a missing ConfigMap.
func TestMigratingADeploymentToARolloutKeepsTheRevisionWhenTheDeploymentGoesLast(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	v1 := app{name: "web", replicas: 2, configMap: "web-config-1", version: "1"}
	w.revision(v1.configMap)
	w.createDeployment(v1.name, v1, v1.replicas, nil)
	rsD := w.waitDeploymentComplete(v1)
	w.waitOwned("ConfigMap", v1.configMap, rsD)

	ro := v1
	ro.name = "web-rollout"
	w.deploy(ro)
	rsR := w.waitHealthy(ro)
	w.waitOwned("ConfigMap", v1.configMap, rsR)
	fg := metav1.DeletePropagationForeground
	if err := w.Kube.AppsV1().Deployments(w.NS).Delete(w.Ctx, v1.name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	w.WaitGone("ReplicaSet "+rsD.Name, func() error { _, err := w.getErr(rsD); return err })
	w.Eventually("the Deployment's ReplicaSet dropped from the revision's owners", func() error {
		return w.ownedByReplicaSets(v1.configMap, rsR.UID)
	})
	if at, gone := w.events.deletedAt("ConfigMap", v1.configMap); gone {
		t.Fatalf("revision %s deleted at %s while the Rollout's ReplicaSet %s uses it", v1.configMap, at, rsR.Name)
	}
	w.podsReady(rsR, ro, int(ro.replicas))
}
